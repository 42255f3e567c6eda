#!/usr/bin/env bash
# Instructions one logged call executes at levels 1, 3 and 5 (to /dev/null), counted by
# callgrind: the difference between runs of 2000 calls and of none, divided by 2000, so startup
# and warm-up cancel out. Nearly deterministic where the timed benchmarks are not (work driven by
# the clock, the date text made once a second and the clock offset checked every 100 ms, varies
# with the run's length under callgrind: a few instructions a call). bench/README.md.
#
# To /dev/null (a character device: the sink's stream path) and to a regular file (its append
# path, which the timed ratios use), removed afterwards.
#
#   bench/log/instructions_per_call.sh [BUILD_DIR]     # default build/default
set -euo pipefail
build=${1:-build/default}
file=$(mktemp "${TMPDIR:-/tmp}/mate_instructions_per_call.XXXXXX")
trap 'rm -f "$file"' EXIT
calls_bin="$build/bench/log/log_calls"
if ! command -v valgrind >/dev/null; then
  echo "instructions_per_call: valgrind is not installed (bash scripts/setup.sh installs it)" >&2
  exit 2
fi
if [[ ! -x $calls_bin ]]; then
  echo "instructions_per_call: $calls_bin not built (cmake --build --preset default)" >&2
  exit 2
fi
instructions() {  # LEVEL CALLS DESTINATION
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$calls_bin" "$1" "$2" "$3" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for dest in /dev/null "$file"; do
  for level in 1 3 5; do
    none=$(instructions "$level" 0 "$dest")
    many=$(instructions "$level" 2000 "$dest")
    echo "level $level, to $([[ $dest == /dev/null ]] && echo /dev/null || echo a file): $(((many - none) / 2000)) instructions per call"
  done
done
