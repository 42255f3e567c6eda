#!/bin/bash
# docs/reference/dump-format.md's NumPy reader works: extract it and read real dumps from
# sample_producer with it. It must print a known tensor (a transposed, strided view) exactly, and
# agree with the document's standard-library reader on every tensor file of the dumps (f32 with
# strides and byte offsets, i64 above 2^53).
# usage: check_doc_numpy_reader.sh DOC PRODUCER
set -euo pipefail
doc=$1 producer=$2
# numpy comes from Debian's python3-numpy (scripts/setup.sh), which is for Debian's interpreter;
# a python3 earlier on PATH (pyenv, a venv) may not have it.
python=
for candidate in /usr/bin/python3 python3; do
  if command -v "$candidate" > /dev/null && "$candidate" -c 'import numpy' 2> /dev/null; then python=$candidate; break; fi
done
[[ -n "$python" ]] || { echo "numpy not installed (scripts/setup.sh installs python3-numpy): skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
extract() {  # the ```python block between <!-- $1:begin --> and <!-- $1:end -->
  sed -n "/<!-- $1:begin -->/,/<!-- $1:end -->/p" "$doc" | sed '1,2d;$d' | sed '$d'
}
extract numpy-reader > "$work/numpy_reader.py"
extract reader > "$work/reader.py"
[[ -s "$work/numpy_reader.py" ]] || { echo "no numpy-reader block in $doc"; exit 1; }
for mode in good int; do
  env -u MATE_DUMP_SAFETENSORS MATE_LOGLEVEL=10 MATE_LOGDEST="$work/log" MATE_DUMP_DIR="$work/dumps" "$producer" "$mode" > /dev/null 2>&1
done
x=$(ls "$work"/dumps/*_sample.axpy/inputs/00_x.pt)
got=$("$python" "$work/numpy_reader.py" "$x")
want="f32 [2, 3] [[-1.0, 0.0, 1.0], [-0.5, 0.5, 1.5]]"
if [[ "$got" != "$want" ]]; then
  echo "the documented NumPy reader printed: $got"
  echo "expected:                            $want"
  exit 1
fi
count=0
while IFS= read -r -d '' f; do
  a=$("$python" "$work/numpy_reader.py" "$f")
  b=$("$python" "$work/reader.py" "$f")
  if [[ "$a" != "$b" ]]; then
    echo "$f: the NumPy reader printed:            $a"
    echo "$f: the standard-library reader printed: $b"
    exit 1
  fi
  count=$((count + 1))
done < <(find "$work/dumps" -name '*.pt' -print0)
(( count >= 10 )) || { echo "expected at least 10 tensor files, found $count"; exit 1; }
grep -q "1152921504606846977" < <(for f in "$work"/dumps/*_sample.increment_i64/inputs/00_x.pt; do "$python" "$work/numpy_reader.py" "$f"; done) ||
  { echo "the i64 input above 2^53 was not read exactly"; exit 1; }
echo "ok: $got; $count tensor files read alike by both documented readers"
