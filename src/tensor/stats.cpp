// Single-pass statistics. Layout walk: the tensor's dimensions are normalized (size-1 dims
// dropped, negative strides flipped, broadcast dims turned into a multiplicity, the rest sorted
// by stride and merged), leaving an odometer over outer dims and one strided inner run. Each run
// goes through one per-dtype kernel; on a device the run is first copied in bounded chunks.
//
// The kernels (stats_kernels.inc) take contiguous runs in blocks on 32- or 64-byte vectors,
// without a branch per element; a block that holds a NaN or Inf is classified again element by element
// (from the float/double bits: |bits| below, at or above the exponent mask), as strided runs are.
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "mate/tensor/stats.hpp"

#include "mate/device/vendors.hpp"

#include "host_read_guard.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>  // the AVX-512 build's e4m3 kernel (stats_e4m3_vnni.inc)
#endif

// The kernels pass 32-byte vectors between their inline helpers, all internal to this file: no
// ABI to keep (GCC reports these at the end of the file, so this cannot be scoped).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace mate::tensor {

// ---- element conversions (exact) ----

float half_to_float(std::uint16_t h) noexcept {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    float f = static_cast<float>(mant) * 0x1p-24f;  // subnormal: mant * 2^-24, exact in float
    return sign ? -f : f;
  }
  if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

float bf16_to_float(std::uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

float fp8_e4m3fn_to_float(std::uint8_t v) noexcept {
  bool neg = v & 0x80;
  int exp = (v >> 3) & 0xf;
  int mant = v & 0x7;
  float f;
  if (exp == 0xf && mant == 0x7) {
    f = std::numeric_limits<float>::quiet_NaN();  // e4m3fn: no Inf, S.1111.111 is NaN
  } else if (exp == 0) {
    f = static_cast<float>(mant) * 0x1p-9f;
  } else {
    f = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  }
  return neg ? -f : f;
}

float fp8_e5m2_to_float(std::uint8_t v) noexcept {
  return half_to_float(static_cast<std::uint16_t>(v << 8));  // e5m2 is the top byte of an f16
}

namespace {

// Zeros in min and max: -0 is below +0 (IEEE 754's minimum and maximum), in every kernel, so a
// zero minimum is -0 exactly when the tensor holds a -0 (and no negative value), a zero maximum
// +0 exactly when it holds a +0 (and no positive value), whatever the layout, the blocks' NaNs
// or the build. The packed formats' kernels order their bit patterns so; the f32/f64 vector
// kernel (the OR of its values' bits, and for a zero maximum their AND) and the classifying one
// (both) find out which zeros there are (`zero_with_sign`); blocks, runs and chunks are combined
// with these.
inline double min_of_values(double a, double b) noexcept { return b < a || (b == a && std::signbit(b)) ? b : a; }
inline double max_of_values(double a, double b) noexcept { return b > a || (b == a && !std::signbit(b)) ? b : a; }
// A zero minimum (maximum) of finite values gets the sign IEEE gives it: -0 when any value has
// its sign bit set (for a minimum of zero that value can only be a -0), +0 when any has it clear.
template <class V>
inline V zero_with_sign(V extreme, bool negative) noexcept {
  return extreme == 0 ? (negative ? -V(0) : V(0)) : extreme;
}

struct Acc {
  std::int64_t finite = 0, nan = 0, inf = 0;
  double sum = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  void add_min(double v) noexcept { min = min_of_values(min, v); }
  void add_max(double v) noexcept { max = max_of_values(max, v); }
};

// The kernels are compiled once per instruction set: for the build's baseline (SSE2 on x86-64)
// and, on x86-64, for AVX2 (twice the vector width, and the 8- and 64-bit compares SSE2 lacks)
// and AVX-512 (F, BW, VL, DQ, VNNI: the 64-bit integer min and max AVX2 lacks, the packed float
// formats on 64-byte registers, and e4m3's exact integer sum, stats_e4m3_vnni.inc), chosen at
// run time. The results are the same in every build: each lane gets the same elements in the
// same order, or the sum is exact. MATE_STATS_HALVES: 32-byte vectors as two native 16-byte
// ones; MATE_STATS_WIDE64: native 64-byte vectors (see stats_vectors.inc).
#if defined(__AVX__)
#define MATE_STATS_HALVES 0
#else
#define MATE_STATS_HALVES 1
#endif
namespace baseline {
#include "stats_kernels.inc"
}  // namespace baseline
#undef MATE_STATS_HALVES

#if defined(__x86_64__) && defined(__GNUC__)
#define MATE_STATS_X86 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define MATE_STATS_HALVES 0
#define MATE_STATS_AVX2_INTRINSICS 1  // (not in the baseline: a -mavx build has 32-byte vectors there)
namespace avx2 {
#include "stats_kernels.inc"
}  // namespace avx2
#undef MATE_STATS_AVX2_INTRINSICS
#undef MATE_STATS_HALVES
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#define MATE_STATS_HALVES 0
#define MATE_STATS_AVX2_INTRINSICS 1
#define MATE_STATS_WIDE64 1
#define MATE_STATS_E4M3_VNNI 1
namespace avx512 {
#include "stats_kernels.inc"
}  // namespace avx512
#undef MATE_STATS_E4M3_VNNI
#undef MATE_STATS_AVX2_INTRINSICS
#undef MATE_STATS_WIDE64
#undef MATE_STATS_HALVES
#pragma GCC pop_options
#endif

using RunKernel = void (*)(ScalarType, const unsigned char*, std::int64_t, std::int64_t, Acc&);

// The kernels of `set`, or nullptr where this build or this CPU has none.
RunKernel kernels_of(StatsKernels set) noexcept {
  switch (set) {
    case StatsKernels::Baseline:
      return baseline::run_kernel;
#if defined(MATE_STATS_X86)
    case StatsKernels::Avx2:
      __builtin_cpu_init();  // needed when the first call comes from a static initializer
      return __builtin_cpu_supports("avx2") ? avx2::run_kernel : nullptr;
    case StatsKernels::Avx512:
      __builtin_cpu_init();
      // (libgcc's checks include the operating system's support of the 64-byte state.)
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                     __builtin_cpu_supports("avx512vnni")
                 ? avx512::run_kernel
                 : nullptr;
#endif
    default:
      return nullptr;
  }
}

StatsKernels best_set() noexcept {
  for (StatsKernels set : {StatsKernels::Avx512, StatsKernels::Avx2})
    if (kernels_of(set) != nullptr) return set;
  return StatsKernels::Baseline;
}

RunKernel best_kernels() noexcept { return kernels_of(best_set()); }

std::atomic<RunKernel> g_forced{nullptr};  // tests and benchmarks: use_stats_kernels_for_testing

void run_kernel(ScalarType type, const unsigned char* p, std::int64_t n, std::int64_t stride, Acc& acc) {
  static const RunKernel best = best_kernels();
  const RunKernel forced = g_forced.load(std::memory_order_relaxed);
  (forced != nullptr ? forced : best)(type, p, n, stride, acc);
}

struct Dim {
  std::int64_t size;
  std::int64_t stride;  // elements, > 0 after normalization
};

// Up to kInline values in place, more on the heap (sized once): the statistics of a logged
// tensor are computed for every call at level 5, and a tensor has a handful of dimensions.
template <class T>
class SmallArray {
 public:
  explicit SmallArray(std::size_t capacity) : data_(inline_) {
    if (capacity > kInline) {
      heap_.resize(capacity);
      data_ = heap_.data();
    }
  }
  SmallArray(const SmallArray&) = delete;
  SmallArray& operator=(const SmallArray&) = delete;
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  void push_back(const T& v) noexcept { data_[size_++] = v; }  // within the capacity given
  void resize_down(std::size_t n) noexcept { size_ = n; }

 private:
  static constexpr std::size_t kInline = 8;
  T inline_[kInline];  // not zeroed: only what push_back wrote is read
  std::vector<T> heap_;
  T* data_;
  std::size_t size_ = 0;
};

// The normalized walk: element offset of the first visited element, outer dims (outermost
// first), the inner run, and how many logical elements each visited one stands for.
struct Walk {
  explicit Walk(const TensorView& t)
      : outer(static_cast<std::size_t>(t.ndim())), idx(static_cast<std::size_t>(t.ndim())) {}
  std::int64_t base = 0;
  SmallArray<Dim> outer;
  Dim inner{1, 1};
  std::int64_t multiplicity = 1;
  // The odometer of for_each_run, allocated here: a walk of host memory may be left at a fault
  // (read_host_guarded), and must then hold nothing that needs destroying.
  SmallArray<std::int64_t> idx;
};

// Fills `w` (made for `t`): the dims that take part, largest stride first, merged where one
// continues another; the last of them becomes the inner run.
void normalize(const TensorView& t, Walk& w) {
  SmallArray<Dim>& dims = w.outer;
  for (int i = 0; i < t.ndim(); ++i) {
    std::int64_t size = t.shape(i), stride = t.stride(i);
    if (size == 1) continue;
    if (stride == 0) {
      w.multiplicity *= size;
      continue;
    }
    if (stride < 0) {
      w.base += (size - 1) * stride;
      stride = -stride;
    }
    dims.push_back({size, stride});
  }
  // Largest stride first, ties in dimension order: an insertion sort (a tensor has a handful of
  // dimensions, and std::stable_sort allocates a buffer).
  for (std::size_t i = 1; i < dims.size(); ++i)
    for (std::size_t j = i; j > 0 && dims[j - 1].stride < dims[j].stride; --j) std::swap(dims[j - 1], dims[j]);
  // Merged in place: merged[k] for k < kept, read from i >= kept.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const Dim d = dims[i];
    if (kept > 0 && dims[kept - 1].stride == d.stride * d.size) {
      dims[kept - 1] = {dims[kept - 1].size * d.size, d.stride};
    } else {
      dims[kept++] = d;
    }
  }
  if (kept > 0) {
    w.inner = dims[kept - 1];
    --kept;
  }
  dims.resize_down(kept);
}

// Calls visit(element_offset) for the start of every inner run.
template <class Visit>
void for_each_run(Walk& w, Visit visit) {
  SmallArray<std::int64_t>& idx = w.idx;
  idx.resize_down(0);
  for (std::size_t d = 0; d < w.outer.size(); ++d) idx.push_back(0);
  std::int64_t offset = w.base;
  while (true) {
    visit(offset);
    std::size_t d = w.outer.size();
    while (d > 0) {
      --d;
      offset += w.outer[d].stride;
      if (++idx[d] < w.outer[d].size) break;
      offset -= w.outer[d].stride * w.outer[d].size;
      idx[d] = 0;
      if (d == 0) return;
    }
    if (w.outer.empty()) return;
  }
}

// Fills `s` in place (a StatsResult's optional, emplaced by the caller: no copy of the result
// on the way out, which at level 5 happens for every logged tensor).
void finish(const Acc& acc, std::int64_t multiplicity, std::int64_t count, bool floating, Stats& s) {
  s.count = count;
  s.floating = floating;
  s.finite = acc.finite * multiplicity;
  s.nan = acc.nan * multiplicity;
  s.inf = acc.inf * multiplicity;
  if (acc.finite > 0) {
    s.min = acc.min;
    s.max = acc.max;
    s.mean = acc.sum / static_cast<double>(acc.finite);
  }
}

// Whether `t` (of scalar type `type`, layout `layout`) can have statistics; when not, says why
// in r.unavailable (the common case touches no string).
[[gnu::always_inline]] inline bool check(const TensorView& t, ScalarType type, const Layout& layout, StatsResult& r) {
  if (layout.error != nullptr) [[unlikely]] {
    r.unavailable = std::string("stats unavailable: invalid layout (") + layout.error + ")";
  } else if (type == ScalarType::Unsupported) [[unlikely]] {
    r.unavailable = "stats unavailable: no statistics for dtype " + dtype_name(t.dtype());
  } else if (t.dl().data == nullptr && layout.numel > 0) [[unlikely]] {
    r.unavailable = "stats unavailable: null data pointer";
  } else {
    return true;
  }
  return false;
}

// Host memory, read in place, through read_host_guarded: a tensor whose memory cannot be read
// (a stale or wild pointer, a device address described as CPU memory) gets no statistics and a
// reason, where reading it would have ended the program before its inputs record was written.
// One StatsResult, returned by name from every path (no copy).
struct HostRead {
  ScalarType type;
  const unsigned char* origin;
  std::int64_t numel;
  std::int64_t element_size;
  Walk* walk = nullptr;  // null: contiguous, one run from the origin
  Acc* acc;
};

void read_host(void* context) {
  HostRead& r = *static_cast<HostRead*>(context);
  if (r.walk == nullptr) {
    // One run from the origin: what the normalized walk comes to for a contiguous tensor,
    // without building it (the common case, once per logged tensor at level 5).
    run_kernel(r.type, r.origin, r.numel, 1, *r.acc);
    return;
  }
  Walk& w = *r.walk;
  for_each_run(w, [&](std::int64_t offset) {
    run_kernel(r.type, r.origin + offset * r.element_size, w.inner.size, w.inner.stride, *r.acc);
  });
}

// read's runs through read_host_guarded over [lo, hi); false with the reason in r when the memory
// could not be read.
bool read_guarded(HostRead& read, std::uintptr_t lo, std::uintptr_t hi, const detail::FloatControls& controls,
                  StatsResult& r) {
  std::uintptr_t fault = 0;
  if (detail::read_host_guarded(lo, hi, read_host, &read, controls, fault)) return true;
  r.unavailable = "stats unavailable: " + detail::host_memory_not_readable(fault, lo, hi);
  return false;
}

// `controls`: those in effect (ExactFloatMode's), for the guarded read to put back after a fault.
StatsResult host_stats(const TensorView& t, const StatsOptions& options, const detail::FloatControls& controls) {
  StatsResult r;
  const ScalarType type = t.scalar_type();
  const Layout layout = options.layout != nullptr ? *options.layout : t.layout();
  const std::int64_t numel = layout.numel;
  if (!check(t, type, layout, r)) return r;
  Acc acc;
  std::int64_t multiplicity = 1;
  if (numel > 0) {
    const std::int64_t es = static_cast<std::int64_t>(t.element_size());
    HostRead read{type, reinterpret_cast<const unsigned char*>(t.origin()), numel, es, nullptr, &acc};
    if (t.is_contiguous(layout)) {
      const std::uintptr_t lo = t.origin();
      if (!read_guarded(read, lo, lo + static_cast<std::uintptr_t>(numel * es), controls, r)) return r;
    } else {
      Walk w(t);
      normalize(t, w);
      multiplicity = w.multiplicity;
      read.walk = &w;
      const VaRange va = t.va_range(layout.extent);
      if (!read_guarded(read, va.lo, va.hi, controls, r)) return r;
    }
  }
  finish(acc, multiplicity, numel, is_floating(type), r.stats.emplace());
  return r;
}

}  // namespace

bool stats_kernels_supported(StatsKernels set) noexcept {
  return set == StatsKernels::Automatic || kernels_of(set) != nullptr;
}

const char* stats_kernels_name(StatsKernels set) noexcept {
  switch (set) {
    case StatsKernels::Automatic: return "automatic";
    case StatsKernels::Baseline: return "baseline";
    case StatsKernels::Avx2: return "AVX2";
    case StatsKernels::Avx512: return "AVX-512";
  }
  return "?";
}

StatsKernels stats_kernels_in_use() noexcept { return best_set(); }

void use_stats_kernels_for_testing(StatsKernels set) noexcept {
  g_forced.store(set == StatsKernels::Automatic ? nullptr : kernels_of(set), std::memory_order_relaxed);
}

StatsResult compute_stats(const TensorView& t, device::Backend& backend, const StatsOptions& options) {
  const detail::ExactFloatMode exact;
  StatsResult r;
  const ScalarType type = t.scalar_type();
  const Layout layout = t.layout();  // (not options.layout: the staging buffer is sized by it)
  if (!check(t, type, layout, r)) return r;
  Walk w(t);
  normalize(t, w);
  const std::int64_t es = static_cast<std::int64_t>(t.element_size());
  const std::int64_t chunk = std::max<std::int64_t>(static_cast<std::int64_t>(options.chunk_bytes), es);
  const std::int64_t span = std::min<std::int64_t>(chunk, std::max<std::int64_t>(layout.extent.size(), es));
  std::vector<unsigned char> buffer(static_cast<std::size_t>(span));
  Acc acc;
  std::string error;
  if (layout.numel > 0) {
    for_each_run(w, [&](std::int64_t offset) {
      if (!error.empty()) return;
      const std::int64_t n = w.inner.size, stride = w.inner.stride;
      // Elements per chunk: as many as fit with their gaps in `chunk` bytes (at least one).
      const std::int64_t per = std::max<std::int64_t>(1, (chunk - es) / (stride * es) + 1);
      for (std::int64_t i = 0; i < n; i += per) {
        std::int64_t m = std::min(per, n - i);
        std::int64_t bytes = ((m - 1) * stride + 1) * es;
        std::uintptr_t src = t.origin() + static_cast<std::uintptr_t>((offset + i * stride) * es);
        device::Status st = backend.read(buffer.data(), src, static_cast<std::size_t>(bytes));
        if (!st.ok()) {
          error = std::string("stats unavailable: ") + backend.name() + " read failed (" +
                  (st.what ? st.what : "?") + ", code " + std::to_string(st.code) + ")";
          return;
        }
        run_kernel(type, buffer.data(), m, stride, acc);
      }
    });
  }
  if (!error.empty()) {
    r.unavailable = error;
    return r;
  }
  finish(acc, w.multiplicity, layout.numel, is_floating(type), r.stats.emplace());
  return r;
}

StatsResult compute_stats(const TensorView& t, const StatsOptions& options) {
  const Memory m = t.memory();
  if (m == Memory::Host) {
    const detail::ExactFloatMode exact;
    return host_stats(t, options, exact.in_effect());
  }
  StatsResult r;
  if (m == Memory::Other) {
    r.unavailable = "stats unavailable: cannot read memory of device " + device_name(t.device());
    return r;
  }
  if (const std::string* why = device_reads_skipped(device_kind(m))) {
    r.unavailable = "stats skipped: " + *why;
    return r;
  }
  // (Why there is none, the same for every tensor of the device, is `mate version`'s to say.)
  device::Backend* b = backend_for(t.device());
  if (b == nullptr) {
    r.unavailable = "stats unavailable: no backend for " + device_name(t.device());
    return r;
  }
  return compute_stats(t, *b, options);
}

}  // namespace mate::tensor
