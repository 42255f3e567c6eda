// Cost of the logging instrumentation at level 0, and throughput of level-5 statistics.
//
//   build/default/bench/log/bench_log
//
// Pairs to compare (same run), goals in bench/README.md:
//  * Trivial/plain vs Trivial/instrumented(_scope): an int function in a dependent chain (ns per
//    call; goal: difference at most 1 ns);
//  * FloatChain/plain vs FloatChain/instrumented(_scope): a float function whose result is the
//    next call's input, so the latency the instrumentation adds is measured, not its
//    throughput (goal: difference at most 0.5 ns);
//  * MemRead vs Stats/<dtype> over the same bytes (bytes_per_second; goal: statistics at least
//    0.8x the plain read at 16 MiB and 64 MiB, for every dtype) with the widest kernels this CPU
//    runs; StatsBaseline/<dtype>: the kernels a CPU without AVX2 runs, StatsAvx2/<dtype>: those
//    a CPU without AVX-512 (F, BW, VL, DQ, VNNI) runs;
//  * StatsRatio/<dtype>/<bytes>: that goal's ratio measured in one run, robust to a busy machine:
//    a plain read and the statistics of the same buffer, alternated, the median of their ratios;
//    StatsRatioRelu/ and StatsRatioZeros/: the same over data whose minimum (and maximum) is zero.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <tuple>
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

// A float in and out: the result comes back in xmm0 and feeds the next call, so anything the
// instrumentation puts on that path (moving the float through another register, saving
// registers in the prologue) adds to every call's latency.
__attribute__((noinline, noipa)) float plain_fma(float x, float y) { return x * 0.5f + y; }

__attribute__((noinline, noipa)) float logged_fma(float x, float y) {
  return MATE_API("fma", x, y).run([&] { return x * 0.5f + y; });
}

__attribute__((noinline, noipa)) float scoped_fma(float x, float y) {
  MATE_API_SCOPE("fma", x, y);
  return x * 0.5f + y;
}

template <float (*F)(float, float)>
void BM_FloatChain(benchmark::State& state) {
  mate::log::set_level_for_testing(0);
  float x = 1.0f;  // converges to 2 (x * 0.5 + 1): no denormals, no overflow
  for (auto _ : state) {
    x = F(x, 1.0f);
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_FloatChain<plain_fma>)->Name("FloatChain/plain");
BENCHMARK(BM_FloatChain<logged_fma>)->Name("FloatChain/instrumented");
BENCHMARK(BM_FloatChain<scoped_fma>)->Name("FloatChain/instrumented_scope");

using mate::tensor::ScalarType;

// The finite fp8 pattern nearest to f (the values below are all in range and, but 0, normal).
std::uint8_t nearest_fp8(float f, bool e4m3) {
  std::uint8_t best = 0;
  for (int p = 0; p < 256; ++p) {
    const auto b = static_cast<std::uint8_t>(p);
    const float v = e4m3 ? mate::tensor::fp8_e4m3fn_to_float(b) : mate::tensor::fp8_e5m2_to_float(b);
    const float w = e4m3 ? mate::tensor::fp8_e4m3fn_to_float(best) : mate::tensor::fp8_e5m2_to_float(best);
    if (v - v == 0 && (v - f) * (v - f) < (w - f) * (w - f)) best = b;  // v - v == 0: finite
  }
  return best;
}

// Finite values of `type` in every position (the common case the statistics are built for),
// cycling through a range with both signs.
void fill(unsigned char* p, std::size_t bytes, ScalarType type) {
  const std::size_t es = mate::tensor::element_size(mate::tensor::dl_dtype(type));
  std::vector<std::uint8_t> fp8(1000);
  if (type == ScalarType::F8E4M3 || type == ScalarType::F8E5M2) {
    for (int k = -200; k < 800; ++k)
      fp8[static_cast<std::size_t>(k + 200)] = nearest_fp8(static_cast<float>(k) * 0.25f, type == ScalarType::F8E4M3);
  }
  for (std::size_t i = 0; i < bytes / es; ++i) {
    const int k = static_cast<int>(i % 1000) - 200;  // -200 .. 799
    const float f = static_cast<float>(k) * 0.25f;
    std::uint64_t bits = 0;
    switch (type) {
      case ScalarType::F64: { double d = f; std::memcpy(&bits, &d, 8); break; }
      case ScalarType::F32: bits = std::bit_cast<std::uint32_t>(f); break;
      case ScalarType::BF16: bits = std::bit_cast<std::uint32_t>(f) >> 16; break;
      case ScalarType::F16: {
        // |f| <= 200, a multiple of 1/4: exact in f16. Normal values only (0 aside).
        const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
        const std::uint32_t e = (u >> 23) & 0xff;
        bits = (u >> 16 & 0x8000) | (e == 0 ? 0 : ((e - 112) << 10 | (u >> 13 & 0x3ff)));
        break;
      }
      case ScalarType::F8E4M3: case ScalarType::F8E5M2:
        bits = fp8[static_cast<std::size_t>(k + 200)];  // the same values, rounded
        break;
      default: bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(k)); break;
    }
    if (type == ScalarType::Bool) bits = i % 3 == 0;
    std::memcpy(p + i * es, &bits, es);
  }
}

// One buffer per (bytes, dtype); MemRead reads the f32 one (any bytes do).
const std::vector<std::uint64_t>& buffer(std::size_t bytes, ScalarType type) {
  static std::map<std::pair<std::size_t, ScalarType>, std::vector<std::uint64_t>> buffers;
  auto& b = buffers[{bytes, type}];
  if (b.empty()) {
    // Only the current size is kept: 64 MiB per dtype would add up.
    for (auto it = buffers.begin(); it != buffers.end();) {
      if (it->second.empty() || &it->second == &b) { ++it; continue; }
      it = buffers.erase(it);
    }
    b.assign(bytes / 8, 0);
    fill(reinterpret_cast<unsigned char*>(b.data()), bytes, type);
  }
  return b;
}

// MemRead's loop over any buffer.
std::uint64_t read_all(const std::vector<std::uint64_t>& b) {
  std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (std::size_t i = 0; i + 4 <= b.size(); i += 4) {
    s0 += b[i];
    s1 += b[i + 1];
    s2 += b[i + 2];
    s3 += b[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

// The baseline: read every byte once (a vectorized integer sum).
void BM_MemRead(benchmark::State& state) {
  auto bytes = static_cast<std::size_t>(state.range(0));
  const auto& b = buffer(bytes, ScalarType::F32);
  for (auto _ : state) benchmark::DoNotOptimize(read_all(b));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

// A 1-D tensor of `type` over all of `b`; its one dimension is kept in `n`.
DLTensor tensor_over(const std::vector<std::uint64_t>& b, ScalarType type, std::int64_t& n) {
  DLTensor t{};
  t.data = const_cast<std::uint64_t*>(b.data());
  t.device = {kDLCPU, 0};
  t.dtype = mate::tensor::dl_dtype(type);
  n = static_cast<std::int64_t>(b.size() * 8 / mate::tensor::element_size(t.dtype));
  t.ndim = 1;
  t.shape = &n;
  return t;
}

template <ScalarType T>
void BM_Stats(benchmark::State& state) {
  auto bytes = static_cast<std::size_t>(state.range(0));
  std::int64_t n = 0;
  const DLTensor t = tensor_over(buffer(bytes, T), T, n);
  for (auto _ : state) {
    auto r = mate::tensor::compute_stats(mate::tensor::TensorView(t));
    benchmark::DoNotOptimize(r.stats->mean);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

// 64 MiB and 16 MiB: from memory (or the last-level cache, where it is that big); 256 KiB: from
// L2 (the computation alone).
#define MATE_SIZES ->Arg(64 << 20)->Arg(16 << 20)->Arg(256 << 10)->Arg(1 << 10)->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_MemRead)->Name("MemRead") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::F32>)->Name("Stats/f32") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::BF16>)->Name("Stats/bf16") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::F16>)->Name("Stats/f16") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::F64>)->Name("Stats/f64") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::F8E4M3>)->Name("Stats/f8e4m3") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::F8E5M2>)->Name("Stats/f8e5m2") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::I8>)->Name("Stats/i8") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::I16>)->Name("Stats/i16") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::I32>)->Name("Stats/i32") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::I64>)->Name("Stats/i64") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::U8>)->Name("Stats/u8") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::U16>)->Name("Stats/u16") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::U32>)->Name("Stats/u32") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::U64>)->Name("Stats/u64") MATE_SIZES;
BENCHMARK(BM_Stats<ScalarType::Bool>)->Name("Stats/bool") MATE_SIZES;

// The statistics' throughput over a plain read's (MemRead's loop) of the same buffer, passes of
// each alternated, the median of each pair's ratio ("ratio"; goal >= 0.8 at 16 and 64 MiB): both
// see the machine as it is in the same milliseconds, where Stats/ and MemRead rows run seconds
// apart.
// What the data holds: fill()'s values; those with every negative value made +0 (ReLU's
// output: a zero minimum in every block); all +0 (a zeroed buffer: zero minimum and maximum).
// Zero extremes are what the -0/+0 rule (-0 below +0) costs the f32/f64 kernels work for.
enum class Data { Values, Relu, Zeros };

const std::vector<std::uint64_t>& data_buffer(std::size_t bytes, ScalarType type, Data data) {
  if (data == Data::Values) return buffer(bytes, type);
  static std::vector<std::uint64_t> b;  // one at a time, as buffer()
  static std::tuple<std::size_t, ScalarType, Data> made{};
  if (made != std::tuple{bytes, type, data}) {
    b = buffer(bytes, type);
    const std::size_t es = mate::tensor::element_size(mate::tensor::dl_dtype(type));
    auto* p = reinterpret_cast<unsigned char*>(b.data());
    for (std::size_t i = 0; i < bytes / es; ++i) {
      const bool negative = (p[(i + 1) * es - 1] & 0x80) != 0;  // the sign bit (little-endian)
      if (data == Data::Zeros || negative) std::memset(p + i * es, 0, es);
    }
    made = {bytes, type, data};
  }
  return b;
}

template <ScalarType T, Data kData = Data::Values>
void BM_StatsRatio(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto& b = data_buffer(bytes, T, kData);
  std::int64_t n = 0;
  const DLTensor t = tensor_over(b, T, n);
  using Clock = std::chrono::steady_clock;
  const int pairs = bytes > (16u << 20) ? 9 : 21;
  for (auto _ : state) {
    std::vector<double> ratios;
    for (int i = 0; i <= pairs; ++i) {  // the first pair warms the caches up, and is left out
      const auto t0 = Clock::now();
      benchmark::DoNotOptimize(read_all(b));
      const auto t1 = Clock::now();
      auto r = mate::tensor::compute_stats(mate::tensor::TensorView(t));
      const auto t2 = Clock::now();
      if (!r.stats) {
        state.SkipWithError(r.unavailable.c_str());
        return;
      }
      benchmark::DoNotOptimize(r.stats->mean);
      if (i > 0) ratios.push_back(std::chrono::duration<double>(t1 - t0) / std::chrono::duration<double>(t2 - t1));
    }
    std::nth_element(ratios.begin(), ratios.begin() + pairs / 2, ratios.end());
    state.counters["ratio"] = ratios[static_cast<std::size_t>(pairs / 2)];
  }
}
#define MATE_RATIO_SIZES ->Arg(64 << 20)->Arg(16 << 20)->Iterations(1)->Unit(benchmark::kMillisecond)
BENCHMARK(BM_StatsRatio<ScalarType::F32>)->Name("StatsRatio/f32") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::BF16>)->Name("StatsRatio/bf16") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::F16>)->Name("StatsRatio/f16") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::F64>)->Name("StatsRatio/f64") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::F8E4M3>)->Name("StatsRatio/f8e4m3") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::F8E5M2>)->Name("StatsRatio/f8e5m2") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::I8>)->Name("StatsRatio/i8") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::I16>)->Name("StatsRatio/i16") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::I32>)->Name("StatsRatio/i32") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::I64>)->Name("StatsRatio/i64") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::U8>)->Name("StatsRatio/u8") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::U16>)->Name("StatsRatio/u16") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::U32>)->Name("StatsRatio/u32") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::U64>)->Name("StatsRatio/u64") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::Bool>)->Name("StatsRatio/bool") MATE_RATIO_SIZES;
// Not in the goal: data with zero extremes (see Data), where f32/f64 blocks are read twice in L1.
BENCHMARK(BM_StatsRatio<ScalarType::F32, Data::Relu>)->Name("StatsRatioRelu/f32") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::F64, Data::Relu>)->Name("StatsRatioRelu/f64") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::F32, Data::Zeros>)->Name("StatsRatioZeros/f32") MATE_RATIO_SIZES;
BENCHMARK(BM_StatsRatio<ScalarType::BF16, Data::Relu>)->Name("StatsRatioRelu/bf16") MATE_RATIO_SIZES;

// The same kernels built for another instruction set: the baseline, what a CPU without AVX2
// runs (their 32-byte vectors are pairs of 16-byte ones there, as on aarch64's NEON), and AVX2
// (bench/README.md).
template <ScalarType T, mate::tensor::StatsKernels K>
void BM_StatsWith(benchmark::State& state) {
  if (!mate::tensor::stats_kernels_supported(K)) {
    state.SkipWithError("this CPU does not run these kernels");
    return;
  }
  mate::tensor::use_stats_kernels_for_testing(K);
  BM_Stats<T>(state);
  mate::tensor::use_stats_kernels_for_testing(mate::tensor::StatsKernels::Automatic);
}
template <ScalarType T>
void BM_StatsBaseline(benchmark::State& state) {
  BM_StatsWith<T, mate::tensor::StatsKernels::Baseline>(state);
}
template <ScalarType T>
void BM_StatsAvx2(benchmark::State& state) {
  BM_StatsWith<T, mate::tensor::StatsKernels::Avx2>(state);
}
#define MATE_BASELINE_SIZES ->Arg(16 << 20)->Arg(1 << 10)->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_StatsBaseline<ScalarType::F32>)->Name("StatsBaseline/f32") MATE_BASELINE_SIZES;
BENCHMARK(BM_StatsBaseline<ScalarType::BF16>)->Name("StatsBaseline/bf16") MATE_BASELINE_SIZES;
BENCHMARK(BM_StatsBaseline<ScalarType::F16>)->Name("StatsBaseline/f16") MATE_BASELINE_SIZES;
BENCHMARK(BM_StatsBaseline<ScalarType::F64>)->Name("StatsBaseline/f64") MATE_BASELINE_SIZES;
BENCHMARK(BM_StatsBaseline<ScalarType::F8E4M3>)->Name("StatsBaseline/f8e4m3") MATE_BASELINE_SIZES;
BENCHMARK(BM_StatsBaseline<ScalarType::I8>)->Name("StatsBaseline/i8") MATE_BASELINE_SIZES;
BENCHMARK(BM_StatsBaseline<ScalarType::I32>)->Name("StatsBaseline/i32") MATE_BASELINE_SIZES;
BENCHMARK(BM_StatsBaseline<ScalarType::I64>)->Name("StatsBaseline/i64") MATE_BASELINE_SIZES;
BENCHMARK(BM_StatsBaseline<ScalarType::U8>)->Name("StatsBaseline/u8") MATE_BASELINE_SIZES;
#define MATE_AVX2_SIZES ->Arg(16 << 20)->Arg(1 << 10)->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_StatsAvx2<ScalarType::F32>)->Name("StatsAvx2/f32") MATE_AVX2_SIZES;
BENCHMARK(BM_StatsAvx2<ScalarType::BF16>)->Name("StatsAvx2/bf16") MATE_AVX2_SIZES;
BENCHMARK(BM_StatsAvx2<ScalarType::F16>)->Name("StatsAvx2/f16") MATE_AVX2_SIZES;
BENCHMARK(BM_StatsAvx2<ScalarType::F8E4M3>)->Name("StatsAvx2/f8e4m3") MATE_AVX2_SIZES;
BENCHMARK(BM_StatsAvx2<ScalarType::F8E5M2>)->Name("StatsAvx2/f8e5m2") MATE_AVX2_SIZES;
BENCHMARK(BM_StatsAvx2<ScalarType::I8>)->Name("StatsAvx2/i8") MATE_AVX2_SIZES;
BENCHMARK(BM_StatsAvx2<ScalarType::I64>)->Name("StatsAvx2/i64") MATE_AVX2_SIZES;
BENCHMARK(BM_StatsAvx2<ScalarType::U64>)->Name("StatsAvx2/u64") MATE_AVX2_SIZES;
BENCHMARK(BM_StatsAvx2<ScalarType::Bool>)->Name("StatsAvx2/bool") MATE_AVX2_SIZES;

}  // namespace

BENCHMARK_MAIN();
