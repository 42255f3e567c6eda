// Cost of the logging instrumentation at level 0, and throughput of level-5 statistics.
//
//   build/default/bench/log/bench_log
//
// Pairs to compare (same run): Trivial/plain vs Trivial/instrumented(_scope) (ns per call, the
// difference must stay under 1 ns); MemRead vs Stats/f32 and Stats/bf16 over the same bytes
// (bytes_per_second, goal: statistics at least 50% of the plain read).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "mate/log/api.hpp"
#include "mate/tensor/stats.hpp"

namespace {

__attribute__((noinline, noipa)) int plain_add(int a, int b) { return a + b; }

__attribute__((noinline, noipa)) int logged_add(int a, int b) {
  return MATE_API("add", a, b).run([&] { return a + b; });
}

__attribute__((noinline, noipa)) int scoped_add(int a, int b) {
  MATE_API_SCOPE("add", a, b);
  return a + b;
}

template <int (*F)(int, int)>
void BM_Trivial(benchmark::State& state) {
  mate::log::set_level_for_testing(0);
  int x = 1;
  for (auto _ : state) {
    x = F(x, 1);
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_Trivial<plain_add>)->Name("Trivial/plain");
BENCHMARK(BM_Trivial<logged_add>)->Name("Trivial/instrumented");
BENCHMARK(BM_Trivial<scoped_add>)->Name("Trivial/instrumented_scope");

// Buffers for the throughput pairs: arg 0 is the size in bytes.
std::vector<std::uint64_t>& buffer(std::size_t bytes) {
  static std::vector<std::uint64_t> b;
  if (b.size() * 8 != bytes) {
    b.assign(bytes / 8, 0);
    // Finite f32 / bf16 values in every position (bf16 halves of 0x3f80xxxx are finite too).
    auto* f = reinterpret_cast<float*>(b.data());
    for (std::size_t i = 0; i < bytes / 4; ++i) f[i] = static_cast<float>(i % 1000) * 0.5f - 100.0f;
  }
  return b;
}

// The baseline: read every byte once (a vectorized integer sum).
void BM_MemRead(benchmark::State& state) {
  auto bytes = static_cast<std::size_t>(state.range(0));
  const auto& b = buffer(bytes);
  for (auto _ : state) {
    std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (std::size_t i = 0; i + 4 <= b.size(); i += 4) {
      s0 += b[i];
      s1 += b[i + 1];
      s2 += b[i + 2];
      s3 += b[i + 3];
    }
    benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

template <mate::tensor::ScalarType T>
void BM_Stats(benchmark::State& state) {
  auto bytes = static_cast<std::size_t>(state.range(0));
  auto& b = buffer(bytes);
  DLTensor t{};
  t.data = b.data();
  t.device = {kDLCPU, 0};
  t.dtype = mate::tensor::dl_dtype(T);
  std::int64_t n = static_cast<std::int64_t>(bytes / mate::tensor::element_size(t.dtype));
  t.ndim = 1;
  t.shape = &n;
  for (auto _ : state) {
    auto r = mate::tensor::compute_stats(mate::tensor::TensorView(t));
    benchmark::DoNotOptimize(r.stats->mean);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

// 64 MiB: from memory; 256 KiB: from cache (the computation alone).
#define MATE_SIZES ->Arg(64 << 20)->Arg(256 << 10)->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_MemRead)->Name("MemRead") MATE_SIZES;
BENCHMARK(BM_Stats<mate::tensor::ScalarType::F32>)->Name("Stats/f32") MATE_SIZES;
BENCHMARK(BM_Stats<mate::tensor::ScalarType::BF16>)->Name("Stats/bf16") MATE_SIZES;

}  // namespace

BENCHMARK_MAIN();
