// One allocation backtrace (src/guard/stack/stack_capture.hpp): the table walk with its rule cache
// warm, against the C++ unwinder it falls back to, from the same frames, in one run.
//
//   build/default/bench/guard/bench_stack_capture --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "guard/stack/stack_capture.hpp"

namespace {

using Capture = int (*)(void**, int);

// `depth` frames of this program above the capture, then the benchmark library's and libc's.
__attribute__((noinline)) int descend(Capture capture, void** frames, int depth) {
  if (depth == 0) return capture(frames, 24);  // what the allocator asks for (kMaxFrames + 8)
  volatile int keep = depth;
  return descend(capture, frames, depth - 1) + keep - depth;
}

void run(benchmark::State& state, Capture capture) {
  void* frames[24];
  const int depth = static_cast<int>(state.range(0));
  int n = 0;
  for (auto _ : state) {
    n = descend(capture, frames, depth);
    benchmark::DoNotOptimize(n);
  }
  state.counters["frames"] = n;
}

void BM_TableWalk(benchmark::State& state) { run(state, mate::guard::capture_stack); }
void BM_CxxUnwinder(benchmark::State& state) { run(state, mate::guard::capture_stack_with_cxx_unwinder); }

BENCHMARK(BM_TableWalk)->Arg(4)->Arg(16);
BENCHMARK(BM_CxxUnwinder)->Arg(4)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
