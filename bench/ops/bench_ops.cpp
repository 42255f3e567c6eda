// The API layer of the reference kernels: argument checks and the kernel lookup of gemm_nt and
// m_grouped_gemm_nt_contiguous at MATE_LOGLEVEL=0, against calling the module's kernel symbol
// directly on the same tensors (the baseline), in the same run.
//
//   build/default/bench/ops/bench_ops --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Pairs (ns per call): Gemm/direct vs Gemm/api on a 1x1x1 GEMM (the difference is the API
// layer's cost; goal: under 1 us); Gemm*/direct vs Gemm*/api on 128x128x128 (ratio near 1);
// Grouped/direct vs Grouped/api on m_sum 256 (the api checks m_indices, O(m_sum)).
#include <benchmark/benchmark.h>
#include <dlpack/dlpack.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "mate/config.hpp"
#include "mate/jit/module.hpp"
#include "mate/log/api.hpp"
#include "mate/ops/contiguous_layout.hpp"
#include "mate/ops/modules.hpp"
#include "mate/ops/ops.hpp"

namespace {

struct Tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
  DLTensor dl{};
  Tensor(std::vector<std::int64_t> s, DLDataType type = {kDLFloat, 32, 1}) : shape(std::move(s)) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    data.assign(static_cast<std::size_t>(n), 0.25f);
    dl = DLTensor{data.data(), {kDLCPU, 0}, static_cast<int>(shape.size()), type, shape.data(), nullptr, 0};
  }
};

using GemmFn = void(long, long, long, const void*, const void*, float*, float, float);
using GroupedFn = void(long, long, long, const void*, const void*, const std::int32_t*, float*);

template <bool kApi>
void BM_Gemm(benchmark::State& state) {
  mate::log::set_level_for_testing(0);
  std::int64_t s = state.range(0);
  Tensor a({s, s}), b({s, s}), out({s, s});
  auto* direct = mate::jit::load_module(
                     mate::ops::module_spec(mate::ops::Kernel::GemmNt, mate::ops::InputType::F32, mate::jit::Toolchain::Host))
                     .function<GemmFn>("mate_ops_gemm_nt");
  for (auto _ : state) {
    if constexpr (kApi) mate::ops::gemm_nt(&a.dl, &b.dl, &out.dl);
    else direct(s, s, s, a.data.data(), b.data.data(), out.data.data(), 1.0f, 0.0f);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Gemm<false>)->Name("Gemm/direct")->Arg(1)->Arg(128);
BENCHMARK(BM_Gemm<true>)->Name("Gemm/api")->Arg(1)->Arg(128);

template <bool kApi>
void BM_Grouped(benchmark::State& state) {
  mate::log::set_level_for_testing(0);
  auto layout = mate::ops::make_contiguous_layout(std::vector<std::int64_t>{100, 0, 150}, 128);
  std::int64_t n = 8, k = 8;
  Tensor lhs({layout.m_sum, k}), rhs({3, n, k}), out({layout.m_sum, n}), idx({layout.m_sum}, {kDLInt, 32, 1});
  auto* idx_data = reinterpret_cast<std::int32_t*>(idx.data.data());
  for (std::size_t r = 0; r < layout.m_indices.size(); ++r) idx_data[r] = layout.m_indices[r];
  auto* direct = mate::jit::load_module(mate::ops::module_spec(mate::ops::Kernel::GroupedGemmNt,
                                                               mate::ops::InputType::F32, mate::jit::Toolchain::Host))
                     .function<GroupedFn>("mate_ops_grouped_gemm_nt");
  for (auto _ : state) {
    if constexpr (kApi) mate::ops::m_grouped_gemm_nt_contiguous(&lhs.dl, &rhs.dl, &out.dl, &idx.dl);
    else direct(layout.m_sum, n, k, lhs.data.data(), rhs.data.data(), idx_data, out.data.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Grouped<false>)->Name("Grouped/direct");
BENCHMARK(BM_Grouped<true>)->Name("Grouped/api");

}  // namespace

int main(int argc, char** argv) {
  // Modules are built once into a workspace next to this program (outside the timings).
  std::string workspace = std::filesystem::canonical("/proc/self/exe").parent_path().string() + "/workspace";
  mate::config::ScopedOverride base(mate::config::Var::MATE_WORKSPACE_BASE, workspace);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
