#!/usr/bin/env bash
# usage: check_downstream.sh BUILD_DIR DOWNSTREAM_SOURCE SCRATCH
set -euo pipefail
build=$1 src=$2 scratch=$3
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$src" -B "$scratch/build" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/build" >/dev/null
out=$(MATE_DEEPGEMM_MK_ALIGNMENT=256 "$scratch/build/downstream")
echo "$out"
[ "$out" = "mk alignment 256" ] || { echo "unexpected output from downstream program"; exit 1; }
test -x "$scratch/prefix/bin/mate"
"$scratch/prefix/bin/mate" version
# The Python package, installed next to libmate.so (docs/python.md), imports and finds its files
# there (not in the build tree).
if [ -d "$scratch/prefix/lib/python/mate" ] && [ -x /usr/bin/python3 ]; then
  where=$(cd / && PYTHONPATH="$scratch/prefix/lib/python" /usr/bin/python3 -c \
    'import mate, mate._mate as m; print(m.library_directory())')
  [ "$where" = "$(cd "$scratch/prefix/lib" && pwd -P)" ] || { echo "installed mate package uses libmate.so from $where"; exit 1; }
  (cd / && PYTHONPATH="$scratch/prefix/lib/python" /usr/bin/python3 -m mate guard-run -- /bin/true) ||
    { echo "python -m mate guard-run failed from the install"; exit 1; }
fi
