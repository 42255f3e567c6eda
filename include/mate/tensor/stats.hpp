// mate/tensor/stats.hpp — single-pass tensor statistics (the level-5 log).
//
// One pass over the elements gives: element count, min, max, mean, NaN count and Inf count.
// The rule, the same for every dtype and every path (host contiguous, host strided, device
// chunks): NaN and ±Inf are counted and excluded from min, max and mean; min/max/mean are over
// the finite values only, and are absent when there are none. Integers and bool (0/1) have no
// NaN/Inf. fp8 e4m3fn has no Inf (its only non-finite value is NaN).
//
// Elements are visited by their strides (non-contiguous, broadcast and negative strides are
// fine; a broadcast element counts once per logical position). Device tensors (CUDA, MUSA) are
// read through a device::Backend in bounded chunks (StatsOptions::chunk_bytes): never a
// full-size host copy. The backend for each device kind comes from mate/tensor/memory.hpp; when
// there is none, statistics are unavailable with a reason, nothing crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "mate/device/backend.hpp"
#include "mate/tensor/memory.hpp"
#include "mate/tensor/tensor_view.hpp"

namespace mate::tensor {

struct Stats {
  std::int64_t count = 0;  // logical elements visited
  std::int64_t finite = 0;  // elements included in min/max/mean
  std::int64_t nan = 0;
  std::int64_t inf = 0;
  // Meaningful when finite > 0. Integers beyond 2^53 are rounded to double; an integer tensor's
  // sum is exact before the mean rounds it once.
  double min = 0;
  double max = 0;
  double mean = 0;
  bool floating = false;
};

struct StatsOptions {
  // Bytes read from a device per backend read() call (the host staging buffer's size).
  std::size_t chunk_bytes = kDefaultChunkBytes;
  // The tensor's layout(), when the caller has it already (the log's tensor line): not computed
  // again for host memory (~120 instructions for a 2-D tensor, per tensor logged at level 5).
  // It must be exactly t.layout(): the host read goes by its element count and extent. (Device
  // memory, read through a staging buffer, always computes its own.)
  const Layout* layout = nullptr;
};

struct StatsResult {
  std::optional<Stats> stats;
  std::string unavailable;  // why there are no stats, when stats is empty
};

// Statistics of `t`: host memory is read directly, device memory through the registered backend.
StatsResult compute_stats(const TensorView& t, const StatsOptions& options = {});
// The same with an explicit backend for device memory (tests, tools).
StatsResult compute_stats(const TensorView& t, device::Backend& backend,
                          const StatsOptions& options = {});

// The statistics kernels are built for the baseline instruction set and, on x86-64, for AVX2 and
// AVX-512 (F, BW, VL, DQ and VNNI); the widest the CPU has is used. Every build gives the same
// results, bit for bit.
enum class StatsKernels { Automatic, Baseline, Avx2, Avx512 };
// Whether `set` is built here and this CPU runs it (Automatic and Baseline: always).
bool stats_kernels_supported(StatsKernels set) noexcept;
const char* stats_kernels_name(StatsKernels set) noexcept;  // "baseline", "AVX2", ...
// The set the statistics use on this CPU (the widest it runs; `mate version` prints it).
StatsKernels stats_kernels_in_use() noexcept;
// For tests and benchmarks: every later call uses `set` (Automatic, or a set this CPU does not
// run: the widest it runs).
void use_stats_kernels_for_testing(StatsKernels set) noexcept;

// Conversions used by the statistics, exposed for tests.
float half_to_float(std::uint16_t h) noexcept;
float bf16_to_float(std::uint16_t h) noexcept;
float fp8_e4m3fn_to_float(std::uint8_t v) noexcept;
float fp8_e5m2_to_float(std::uint8_t v) noexcept;

}  // namespace mate::tensor
