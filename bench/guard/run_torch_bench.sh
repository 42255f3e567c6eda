#!/usr/bin/env bash
# `import torch` and a small CPU training step (examples/python/torch_train_step.py:
# torch.nn.Linear, autograd, SGD) under glibc
# malloc, MATE's guarded allocator (mate guard-run, defaults: no variable set) and Electric Fence
# (libefence.so), in one run: wall time and peak RSS by /usr/bin/time, ratios against glibc in
# the same run. Debian's /usr/bin/python3 with python3-torch (issue 20's goal: import torch
# under the guard in at most 2x the plain time).
#
#   bash bench/guard/run_torch_bench.sh [build dir] [runs]
#
# Each row is the median of `runs` runs (default 3). A run that fails prints its last line of
# output instead (Electric Fence gives every allocation two pages and two map entries: at the
# stock vm.max_map_count of 65530 it runs out of them during `import torch`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/measure.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-build/default}
runs=${2:-3}
mate="$build/bin/mate"
python=/usr/bin/python3
[ -x "$python" ] || { echo "run_torch_bench.sh: needs $python with python3-torch" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || { echo "run_torch_bench.sh: $python cannot import torch (apt-get install python3-torch)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "run_torch_bench.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
efence=$(find_lib libefence.so)

scratch=$(mktemp -d)  # measure's output files
trap 'rm -rf "$scratch"' EXIT

run() {  # name, command prefix...
  local name=$1; shift
  if ! measure "$@"; then
    printf '| %s | failed: %s | | | |\n' "$name" "$(cut -c1-160 <<<"$failure")"; return
  fi
  [ "$name" = "glibc malloc" ] && { base_t=$seconds; base_m=$kib; }
  printf '| %s | %s | %s | %s | %s |\n' "$name" "$seconds" "$(ratio "$seconds" "$base_t")" "$kib" "$(ratio "$kib" "$base_m")"
}

for what in import train; do
  if [ "$what" = import ]; then
    command=("$python" -c 'import torch'); title="python3 -c 'import torch'"
  else
    command=("$python" "$root/examples/python/torch_train_step.py"); title="python3 torch_train_step.py (import torch, nn.Linear, 5 SGD steps)"
  fi
  echo "$title; medians of $runs runs; vm.max_map_count $(cat /proc/sys/vm/max_map_count)"
  echo "| allocator | seconds | time × glibc | peak RSS KiB | RSS × glibc |"
  echo "|---|---:|---:|---:|---:|"
  run "glibc malloc" env
  run "MATE guard-run (defaults)" "$mate" guard-run --
  run "MATE guard-run --no-backtraces" "$mate" guard-run --no-backtraces --
  if [ -n "$efence" ]; then
    run "Electric Fence" env LD_PRELOAD="$efence" EF_ALLOW_MALLOC_0=1
  else
    echo "| Electric Fence | not installed (apt-get install electric-fence) | | | |"
  fi
  echo
done
