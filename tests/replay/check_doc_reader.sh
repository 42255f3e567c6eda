#!/bin/bash
# docs/reference/dump-format.md must be enough to read a dump: extract its standard-library
# Python reader and read a tensor that sample_producer dumped (a transposed, strided view).
# usage: check_doc_reader.sh DOC PRODUCER
set -euo pipefail
doc=$1 producer=$2
command -v python3 > /dev/null || { echo "python3 not installed: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed -n '/<!-- reader:begin -->/,/<!-- reader:end -->/p' "$doc" | sed '1,2d;$d' | sed '$d' > "$work/reader.py"
env -u MATE_DUMP_SAFETENSORS MATE_LOGLEVEL=10 MATE_LOGDEST="$work/log" MATE_DUMP_DIR="$work/dumps" "$producer" good > /dev/null 2>&1
x=$(ls "$work"/dumps/*_sample.axpy/inputs/00_x.pt)
got=$(python3 "$work/reader.py" "$x")
want="f32 [2, 3] [[-1.0, 0.0, 1.0], [-0.5, 0.5, 1.5]]"
if [[ "$got" != "$want" ]]; then
  echo "the documented reader printed: $got"
  echo "expected:                      $want"
  exit 1
fi
echo "ok: $got"
