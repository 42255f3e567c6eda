#!/bin/bash
# The example a user reads first, run the way docs/dumps-and-replay.md says: dump at level 10,
# then `mate replay --lib` on the dumps passes every call.
# usage: check_example.sh DEMO MATE KERNELS_SO
set -euo pipefail
# Under AddressSanitizer: the library's static copy of MATE is interposed by the program's on
# purpose; report ODR violations only when the sizes differ (docs/dumps-and-replay.md).
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_odr_violation=1"
demo=$1 mate=$2 lib=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
env MATE_LOGLEVEL=10 MATE_LOGDEST="$work/log" MATE_DUMP_DIR="$work/dumps" "$demo"
[[ $(ls "$work/dumps" | wc -l) == 2 ]] || { echo "expected two call directories"; ls -l "$work/dumps"; exit 1; }
"$mate" replay --dir "$work/dumps" --lib "$lib" | tee "$work/out"
grep -qx "2 passed, 0 failed" "$work/out"
