#!/usr/bin/env bash
# Alloc+free throughput and peak resident memory of one workload (guard_workload) under glibc
# malloc, Electric Fence (libefence.so, Debian electric-fence), DUMA (libduma.so, Debian duma)
# and MATE's guarded allocator (mate guard-run), in one run. Ratios are against glibc.
#
#   bash bench/guard/run_guard_bench.sh [build dir] [pairs] [window] [runs] [c++|c]
#
# The last argument picks the workload's build: a C++ program (default; its C++ runtime is
# loaded) or a C program (only the C library, like `sort` or python3).
#
# Each row is the median of `runs` runs (default 5) of each figure: libraries load at a random
# address each run, which moves the kernel's 64 KiB fault-around windows and so peak RSS by up
# to ~150 KiB between runs of the same allocator.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/measure.sh"
build=${1:-build/default}
pairs=${2:-100000}
window=${3:-256}
runs=${4:-5}
program=${5:-c++}
case "$program" in
  c++) workload="$build/bench/guard/guard_workload" ;;
  c) workload="$build/bench/guard/guard_workload_c" ;;
  *) echo "run_guard_bench.sh: unknown program '$program'; accepted: c++, c" >&2; exit 2 ;;
esac
mate="$build/bin/mate"
efence=$(find_lib libefence.so)
duma=$(find_lib libduma.so)

div() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { printf f, a / b }'; }

run() {  # name, command...
  local name=$1; shift
  local line lines=""
  local out
  for ((r = 0; r < runs; ++r)); do
    out=$("$@" "$workload" "$pairs" "$window" 2>&1 || true)
    if ! line=$(grep pairs_per_s <<<"$out"); then
      printf '| %s | failed: %s | | | | | | | |\n' "$name" "$(tail -1 <<<"$out" | tr '|' '/')"; return
    fi
    lines+="$line"$'\n'
  done
  local rate rss anon
  rate=$(awk 'NF {print $2}' <<<"$lines" | median); rss=$(awk 'NF {print $4}' <<<"$lines" | median)
  anon=$(awk 'NF {print $6}' <<<"$lines" | median)
  [ -z "${base_rate:-}" ] && { base_rate=$rate; base_rss=$rss; }
  [ "$name" = "Electric Fence" ] && { ef_rate=$rate; ef_rss=$rss; ef_anon=$anon; }
  local vs_ef_rate="—" vs_ef_rss="—" vs_ef_anon="—"
  if [ -n "${ef_rate:-}" ]; then
    vs_ef_rate=$(div "$rate" "$ef_rate" '%.2f')
    vs_ef_rss=$(div "$rss" "$ef_rss" '%.2f')
    vs_ef_anon=$(div "$anon" "$ef_anon" '%.2f')
  fi
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$rate" "$(div "$rate" "$base_rate" '%.2g')" \
    "$vs_ef_rate" "$rss" "$(div "$rss" "$base_rss" '%.2f')" "$vs_ef_rss" "$anon" "$vs_ef_anon"
}

echo "workload ($program program): $pairs alloc+free pairs, window $window live, sizes 16 B .. 70 KB; medians of $runs runs"
# Peak RSS (VmHWM) counts every resident page, shared library pages included; private KiB is
# the anonymous resident memory at the workload's fullest point (window live, quarantine full):
# what the allocator itself holds.
echo "| allocator | pairs/s | × glibc | × Electric Fence | peak RSS KiB | RSS × glibc | RSS × Electric Fence | private KiB | private × Electric Fence |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
run "glibc malloc" env
[ -n "$efence" ] && run "Electric Fence" env LD_PRELOAD="$efence" EF_ALLOW_MALLOC_0=1 || echo "| Electric Fence | not installed (apt-get install electric-fence) | | | | | | | |"
# Electric Fence with freed memory kept inaccessible: the use-after-free protection MATE's
# quarantine gives (EF keeps every freed page; MATE a bounded FIFO).
[ -n "$efence" ] && run "Electric Fence, EF_PROTECT_FREE=1" env LD_PRELOAD="$efence" EF_ALLOW_MALLOC_0=1 EF_PROTECT_FREE=1
[ -n "$duma" ] && run "DUMA" env LD_PRELOAD="$duma" DUMA_DISABLE_BANNER=1 || echo "| DUMA | not installed (apt-get install duma) | | | | | | | |"
run "MATE guard, tail" "$mate" guard-run --mode tail --
run "MATE guard, head" "$mate" guard-run --mode head --
# The same protection as Electric Fence's default (freed memory reused at once, no quarantine).
run "MATE guard, tail, no quarantine" env MATE_GUARD_QUARANTINE_MB=0 "$mate" guard-run --mode tail --
# Without backtraces (the unwinder then never reads the program's unwind tables).
run "MATE guard, tail, no backtraces" "$mate" guard-run --mode tail --no-backtraces --
# What Electric Fence records: no quarantine, no backtraces.
run "MATE guard, tail, no quarantine, no backtraces" env MATE_GUARD_QUARANTINE_MB=0 "$mate" guard-run --mode tail --no-backtraces --
