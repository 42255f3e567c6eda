#!/usr/bin/env bash
# Every benchmark of bench/README.md, with the commands written there: set up, build the default
# configuration, run each in turn. Figures are ratios against baselines measured in the same run;
# compare them with bench/README.md, not with absolute numbers from another machine.
#
#   bash scripts/bench.sh            # all
#   bash scripts/bench.sh guard log  # only these sections (log, jit, ops, guard, dump)
set -euo pipefail
cd "$(dirname "$0")/.."
all=(log jit ops guard dump)
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=("${all[@]}")
for section in "${sections[@]}"; do
  [[ " ${all[*]} " == *" $section "* ]] || { echo "unknown section '$section'; the sections are: ${all[*]}" >&2; exit 2; }
done
bash scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
b=build/default/bench
for section in "${sections[@]}"; do
  echo
  echo "=== $section (bench/README.md \"$section\")"
  case "$section" in
    log) "$b/log/bench_log" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true ;;
    jit) "$b/jit/bench_jit_warm_hit" --benchmark_report_aggregates_only=true ;;
    ops) "$b/ops/bench_ops" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true ;;
    guard)
      "$b/guard/bench_stack_capture" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
      bash bench/guard/run_guard_bench.sh build/default 50000 256
      bash bench/guard/run_guard_bench.sh build/default 50000 256 5 c
      bash bench/guard/run_guard_bench.sh build/default 20000 4096
      bash bench/guard/run_program_bench.sh build/default 3 compiler
      bash bench/guard/run_program_bench.sh build/default 3 python
      bash bench/guard/run_torch_bench.sh build/default 3 ;;
    dump) "$b/dump/bench_dump" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true ;;
  esac
done
