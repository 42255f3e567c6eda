#!/usr/bin/env bash
# Time and peak resident memory of a real allocation-heavy program under glibc malloc, Electric
# Fence (libefence.so) and MATE's guarded allocator (mate guard-run), in one run. Where
# guard_workload measures a fixed mix, this shows what a program with thousands of live
# allocations and many distinct call paths costs (the stack depot, the unwinder's tables).
#
#   bash bench/guard/run_program_bench.sh [build dir] [runs] [compiler|python]
#
# compiler (default): the C++ compiler (cc1plus) compiling one translation unit; python: python3
# building 200,000 small dicts and round-tripping them through json.
# Peak RSS is /usr/bin/time's %M: the largest process of the tree (cc1plus; the g++ driver and
# `mate` are a few MiB). Each row is the median of `runs` runs (default 3).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/measure.sh"
build=${1:-build/default}
runs=${2:-3}
program=${3:-compiler}
mate="$build/bin/mate"
cxx=${CXX:-g++}
efence=$(find_lib libefence.so)
[ -x /usr/bin/time ] || { echo "run_program_bench.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# The translation unit: standard headers only (so it compiles wherever g++ does) and enough
# templates to keep the optimizer busy (~1 s under glibc, ~1 min under Electric Fence).
cat > "$scratch/tu.cpp" <<'CPP'
#include <algorithm>
#include <map>
#include <string>
#include <vector>
std::map<std::string, std::vector<int>> index_words(const std::vector<std::string>& words) {
  std::map<std::string, std::vector<int>> out;
  int n = 0;
  for (const auto& w : words) out[w].push_back(n++);
  return out;
}
std::vector<std::string> sorted_keys(const std::map<std::string, std::vector<int>>& m) {
  std::vector<std::string> v;
  for (const auto& [k, ids] : m) if (!ids.empty()) v.push_back(k);
  std::sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) { return a.size() < b.size() || (a.size() == b.size() && a < b); });
  return v;
}
CPP
case "$program" in
  compiler)
    command=("$cxx" -O1 -std=c++17 -c "$scratch/tu.cpp" -o "$scratch/tu.o")
    title="cc1plus compiling one C++17 translation unit (-O1)" ;;
  python)
    # The system's interpreter, not a version manager's shim (a shell script that would be
    # measured too).
    python=/usr/bin/python3
    [ -x "$python" ] || python=$(command -v python3)
    command=("$python" -c 'import json; d = [{"k": str(i), "v": [i] * 5} for i in range(200000)]; print(len(json.loads(json.dumps(d))))')
    title="python3 building 200,000 dicts and round-tripping them through json" ;;
  *) echo "run_program_bench.sh: unknown program '$program'; accepted: compiler, python" >&2; exit 2 ;;
esac

run() {  # name, command prefix...
  local name=$1; shift
  if ! measure "$@"; then
    printf '| %s | failed: %s | | | |\n' "$name" "$failure"; return
  fi
  [ "$name" = "Electric Fence" ] && { ef_t=$seconds; ef_m=$kib; }
  local vs_t="—" vs_m="—"
  [ -n "${ef_t:-}" ] && { vs_t=$(ratio "$seconds" "$ef_t"); vs_m=$(ratio "$kib" "$ef_m"); }
  printf '| %s | %s | %s | %s | %s |\n' "$name" "$seconds" "$vs_t" "$kib" "$vs_m"
}

echo "$title; medians of $runs runs"
echo "| allocator | seconds | time × Electric Fence | peak RSS KiB | RSS × Electric Fence |"
echo "|---|---:|---:|---:|---:|"
run "glibc malloc" env
if [ -n "$efence" ]; then
  run "Electric Fence" env LD_PRELOAD="$efence" EF_ALLOW_MALLOC_0=1
else
  echo "| Electric Fence | not installed (apt-get install electric-fence) | | | |"
fi
run "MATE guard, tail" "$mate" guard-run --mode tail --
run "MATE guard, tail, no backtraces" "$mate" guard-run --mode tail --no-backtraces --
run "MATE guard, tail, no quarantine, no backtraces" env MATE_GUARD_QUARANTINE_MB=0 "$mate" guard-run --mode tail --no-backtraces --
