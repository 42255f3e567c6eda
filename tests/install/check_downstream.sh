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
