// Single-pass statistics. Layout walk: the tensor's dimensions are normalized (size-1 dims
// dropped, negative strides flipped, broadcast dims turned into a multiplicity, the rest sorted
// by stride and merged), leaving an odometer over outer dims and one strided inner run. Each run
// goes through one per-dtype kernel; on a device the run is first copied in bounded chunks.
//
// Kernels classify every value from its float/double bits (|bits| below, at or above the
// exponent mask: finite, Inf, NaN) without branches, so the contiguous f32/bf16 loops vectorize.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "mate/tensor/stats.hpp"

#include "mate/device/vendors.hpp"

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

struct Acc {
  std::int64_t finite = 0, nan = 0, inf = 0;
  double sum = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
};

template <class Raw>
inline Raw load(const unsigned char* p, std::int64_t i) noexcept {
  Raw r;
  std::memcpy(&r, p + i * static_cast<std::int64_t>(sizeof(Raw)), sizeof(Raw));
  return r;
}

// Floating kernel: Raw is the stored type, Conv turns it into float (or double for f64).
template <class Raw, class V, class Conv>
void float_run(const unsigned char* p, std::int64_t n, std::int64_t stride, Acc& acc, Conv conv) {
  using Bits = std::conditional_t<sizeof(V) == 4, std::uint32_t, std::uint64_t>;
  constexpr Bits kAbs = static_cast<Bits>(sizeof(V) == 4 ? 0x7fffffffull : 0x7fffffffffffffffull);
  constexpr Bits kExp = static_cast<Bits>(sizeof(V) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  constexpr V kInf = std::numeric_limits<V>::infinity();
  constexpr int L = 8;
  V mn[L], mx[L];
  double s[L];
  std::int64_t fin[L], nan[L], inf[L];
  for (int j = 0; j < L; ++j) {
    mn[j] = kInf;
    mx[j] = -kInf;
    s[j] = 0;
    fin[j] = nan[j] = inf[j] = 0;
  }
  auto step = [&](int j, V v) {
    Bits a = std::bit_cast<Bits>(v) & kAbs;
    bool f = a < kExp;
    fin[j] += f;
    nan[j] += a > kExp;
    inf[j] += a == kExp;
    V lo = f ? v : kInf;
    V hi = f ? v : -kInf;
    mn[j] = lo < mn[j] ? lo : mn[j];
    mx[j] = hi > mx[j] ? hi : mx[j];
    s[j] += f ? static_cast<double>(v) : 0.0;
  };
  std::int64_t i = 0;
  if (stride == 1) {
    for (; i + L <= n; i += L) {
      for (int j = 0; j < L; ++j) step(j, conv(load<Raw>(p, i + j)));
    }
    for (; i < n; ++i) step(0, conv(load<Raw>(p, i)));
  } else {
    for (; i < n; ++i) step(0, conv(load<Raw>(p, i * stride)));
  }
  for (int j = 0; j < L; ++j) {
    acc.finite += fin[j];
    acc.nan += nan[j];
    acc.inf += inf[j];
    acc.sum += s[j];
    acc.min = std::min(acc.min, static_cast<double>(mn[j]));
    acc.max = std::max(acc.max, static_cast<double>(mx[j]));
  }
}

constexpr std::int64_t kBlock = 2048;  // elements per block of the contiguous kernels
constexpr std::int64_t kPrefetchBytes = 2048;

// The sum of n finite values in double: what a block's float lane sums give when they overflow.
template <class Raw, class Conv>
double sum_in_double(const unsigned char* p, std::int64_t n, Conv conv) {
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(conv(load<Raw>(p, i)));
  return sum;
}

// The common case, all values finite, without classifying each one: lane-wise min, max and sum
// plus a check that stays 0 only while every value is finite (x * 0 is NaN for NaN and ±Inf).
// Written so the compiler vectorizes it. Returns false when the block holds a non-finite value;
// the caller then runs the classifying kernel on the same block, still in L1 cache, so memory
// is read once either way.
template <class Raw, class V, class Conv>
bool finite_block(const unsigned char* p, std::int64_t n, Acc& acc, Conv conv) {
  constexpr int L = 16;
  constexpr V kInf = std::numeric_limits<V>::infinity();
  V mn[L], mx[L], s[L], chk[L];
  for (int j = 0; j < L; ++j) {
    mn[j] = kInf;
    mx[j] = -kInf;
    s[j] = 0;
    chk[j] = 0;
  }
  std::int64_t i = 0;
  for (; i + L <= n; i += L) {
    // This loop does more per byte than a plain read, so the CPU keeps fewer loads in flight:
    // ask for the data ahead explicitly (a hint; reading past the end does not fault).
    __builtin_prefetch(p + (i + L) * static_cast<std::int64_t>(sizeof(Raw)) + kPrefetchBytes);
    for (int j = 0; j < L; ++j) {
      V v = conv(load<Raw>(p, i + j));
      mn[j] = v < mn[j] ? v : mn[j];
      mx[j] = v > mx[j] ? v : mx[j];
      s[j] += v;
      chk[j] += v * V(0);
    }
  }
  for (; i < n; ++i) {
    V v = conv(load<Raw>(p, i));
    mn[0] = v < mn[0] ? v : mn[0];
    mx[0] = v > mx[0] ? v : mx[0];
    s[0] += v;
    chk[0] += v * V(0);
  }
  V check = 0, overflow = 0;
  for (int j = 0; j < L; ++j) check += chk[j];
  if (!(check == V(0))) return false;
  // A lane sum that overflowed stays Inf or NaN, so `overflow` (the same x * 0 test) is 0 unless
  // one did: finite values near the type's maximum (2e38 in f32) are then summed again in double,
  // as the strided path sums them, instead of giving an Inf mean. Rare; the block is still in L1.
  for (int j = 0; j < L; ++j) overflow += s[j] * V(0);
  if (!(overflow == V(0))) {
    acc.sum += sum_in_double<Raw>(p, n, conv);
    for (int j = 0; j < L; ++j) s[j] = 0;
  }
  for (int j = 0; j < L; ++j) {
    acc.sum += static_cast<double>(s[j]);
    acc.min = std::min(acc.min, static_cast<double>(mn[j]));
    acc.max = std::max(acc.max, static_cast<double>(mx[j]));
  }
  acc.finite += n;
  return true;
}

// Conversions as distinct types, so each dtype gets its own inlined kernel.
struct Bf16 {
  float operator()(std::uint16_t h) const noexcept { return bf16_to_float(h); }
};
struct Half {
  float operator()(std::uint16_t h) const noexcept { return half_to_float(h); }
};

// bf16 on its 16-bit patterns, eight at a time (GCC vector types: SSE2 on any x86-64):
//  * non-finite check: max of |bits| (exponent all ones means NaN or Inf);
//  * min/max on an integer key with the same order as the values (sign-magnitude to two's
//    complement: negative patterns get their magnitude bits flipped);
//  * sum: the patterns widened to f32 (bf16 is the top half of an f32) and added.
bool finite_block_bf16(const unsigned char* p, std::int64_t n, Acc& acc) {
  using S8 = std::int16_t __attribute__((vector_size(16)));
  using F4 = float __attribute__((vector_size(16)));
  const S8 zero = {};
  const S8 magnitude = zero + 0x7fff;
  S8 kmin = magnitude, kmax = zero - 0x7fff - 1, worst = zero;
  F4 s0 = {}, s1 = {}, s2 = {}, s3 = {};
  std::int64_t i = 0;
  auto step = [&](S8 h, F4& lo_sum, F4& hi_sum) {
    S8 a = h & magnitude;
    worst = a > worst ? a : worst;
    S8 key = h ^ ((h >> 15) & magnitude);
    kmin = key < kmin ? key : kmin;
    kmax = key > kmax ? key : kmax;
    lo_sum += reinterpret_cast<F4>(__builtin_shufflevector(zero, h, 0, 8, 1, 9, 2, 10, 3, 11));
    hi_sum += reinterpret_cast<F4>(__builtin_shufflevector(zero, h, 4, 12, 5, 13, 6, 14, 7, 15));
  };
  for (; i + 16 <= n; i += 16) {
    __builtin_prefetch(p + i * 2 + kPrefetchBytes);
    S8 h0, h1;
    std::memcpy(&h0, p + i * 2, sizeof h0);
    std::memcpy(&h1, p + i * 2 + 16, sizeof h1);
    step(h0, s0, s1);
    step(h1, s2, s3);
  }
  std::int16_t worst_bits = 0, kmin_bits = 0x7fff, kmax_bits = -0x8000;
  for (int j = 0; j < 8; ++j) {
    worst_bits = std::max(worst_bits, worst[j]);
    kmin_bits = std::min(kmin_bits, kmin[j]);
    kmax_bits = std::max(kmax_bits, kmax[j]);
  }
  double sum = 0;
  for (int j = 0; j < 4; ++j) sum += static_cast<double>(s0[j]) + s1[j] + s2[j] + s3[j];
  for (; i < n; ++i) {
    auto h = static_cast<std::int16_t>(load<std::uint16_t>(p, i));
    worst_bits = std::max<std::int16_t>(worst_bits, h & 0x7fff);
    auto key = static_cast<std::int16_t>(h ^ ((h >> 15) & 0x7fff));
    kmin_bits = std::min(kmin_bits, key);
    kmax_bits = std::max(kmax_bits, key);
    sum += bf16_to_float(static_cast<std::uint16_t>(h));
  }
  if (worst_bits >= 0x7f80) return false;
  if (n == 0) return true;
  // As in finite_block: f32 lane sums of values near the bf16 maximum overflow; sum in double.
  if (!std::isfinite(sum)) sum = sum_in_double<std::uint16_t>(p, n, Bf16{});
  auto value = [](std::int16_t key) {
    return static_cast<double>(bf16_to_float(static_cast<std::uint16_t>(key ^ ((key >> 15) & 0x7fff))));
  };
  acc.sum += sum;
  acc.min = std::min(acc.min, value(kmin_bits));
  acc.max = std::max(acc.max, value(kmax_bits));
  acc.finite += n;
  return true;
}

// Contiguous runs go block by block through finite_block; strided runs (and blocks with a
// NaN or Inf) through the classifying float_run. Blocks are small enough for L1 and for float
// lane sums to stay accurate (each lane adds at most kBlock / 16 values before the double sum);
// a block whose lane sums overflow is summed again in double, so no path gives an Inf mean.
template <class Raw, class V, class Conv>
void float_elements(const unsigned char* p, std::int64_t n, std::int64_t stride, Acc& acc, Conv conv) {
  if (stride != 1) return float_run<Raw, V>(p, n, stride, acc, conv);
  for (std::int64_t i = 0; i < n; i += kBlock) {
    const unsigned char* b = p + i * static_cast<std::int64_t>(sizeof(Raw));
    std::int64_t m = std::min(kBlock, n - i);
    bool finite;
    if constexpr (std::is_same_v<Conv, Bf16>) {
      finite = finite_block_bf16(b, m, acc);
    } else {
      finite = finite_block<Raw, V>(b, m, acc, conv);
    }
    if (!finite) float_run<Raw, V>(b, m, 1, acc, conv);
  }
}

template <class Raw>
void int_run(const unsigned char* p, std::int64_t n, std::int64_t stride, Acc& acc, bool as_bool) {
  using Wide = std::conditional_t<std::is_signed_v<Raw>, std::int64_t, std::uint64_t>;
  Wide mn = std::numeric_limits<Wide>::max(), mx = std::numeric_limits<Wide>::lowest();
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    Wide v = static_cast<Wide>(load<Raw>(p, i * stride));
    if (as_bool) v = v != 0;
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
    s += static_cast<double>(v);
  }
  if (n == 0) return;
  acc.finite += n;
  acc.sum += s;
  acc.min = std::min(acc.min, static_cast<double>(mn));
  acc.max = std::max(acc.max, static_cast<double>(mx));
}

const float* fp8_table(bool e4m3) {
  static const std::vector<float> e4 = [] {
    std::vector<float> t(256);
    for (int i = 0; i < 256; ++i) t[i] = fp8_e4m3fn_to_float(static_cast<std::uint8_t>(i));
    return t;
  }();
  static const std::vector<float> e5 = [] {
    std::vector<float> t(256);
    for (int i = 0; i < 256; ++i) t[i] = fp8_e5m2_to_float(static_cast<std::uint8_t>(i));
    return t;
  }();
  return e4m3 ? e4.data() : e5.data();
}

// One inner run of n elements, `stride` elements apart, starting at p.
void run_kernel(ScalarType type, const unsigned char* p, std::int64_t n, std::int64_t stride,
                Acc& acc) {
  switch (type) {
    case ScalarType::F64:
      return float_elements<double, double>(p, n, stride, acc, [](double v) { return v; });
    case ScalarType::F32:
      return float_elements<float, float>(p, n, stride, acc, [](float v) { return v; });
    case ScalarType::F16:
      return float_elements<std::uint16_t, float>(p, n, stride, acc, Half{});
    case ScalarType::BF16:
      return float_elements<std::uint16_t, float>(p, n, stride, acc, Bf16{});
    case ScalarType::F8E4M3: {
      const float* t = fp8_table(true);
      return float_elements<std::uint8_t, float>(p, n, stride, acc, [t](std::uint8_t v) { return t[v]; });
    }
    case ScalarType::F8E5M2: {
      const float* t = fp8_table(false);
      return float_elements<std::uint8_t, float>(p, n, stride, acc, [t](std::uint8_t v) { return t[v]; });
    }
    case ScalarType::I8: return int_run<std::int8_t>(p, n, stride, acc, false);
    case ScalarType::I16: return int_run<std::int16_t>(p, n, stride, acc, false);
    case ScalarType::I32: return int_run<std::int32_t>(p, n, stride, acc, false);
    case ScalarType::I64: return int_run<std::int64_t>(p, n, stride, acc, false);
    case ScalarType::U8: return int_run<std::uint8_t>(p, n, stride, acc, false);
    case ScalarType::U16: return int_run<std::uint16_t>(p, n, stride, acc, false);
    case ScalarType::U32: return int_run<std::uint32_t>(p, n, stride, acc, false);
    case ScalarType::U64: return int_run<std::uint64_t>(p, n, stride, acc, false);
    case ScalarType::Bool: return int_run<std::uint8_t>(p, n, stride, acc, true);
    case ScalarType::Unsupported: return;
  }
}

struct Dim {
  std::int64_t size;
  std::int64_t stride;  // elements, > 0 after normalization
};

// The normalized walk: element offset of the first visited element, outer dims (outermost
// first), the inner run, and how many logical elements each visited one stands for.
struct Walk {
  std::int64_t base = 0;
  std::vector<Dim> outer;
  Dim inner{1, 1};
  std::int64_t multiplicity = 1;
};

Walk normalize(const TensorView& t) {
  Walk w;
  std::vector<Dim> dims;
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
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty() && merged.back().stride == d.stride * d.size) {
      merged.back() = {merged.back().size * d.size, d.stride};
    } else {
      merged.push_back(d);
    }
  }
  if (!merged.empty()) {
    w.inner = merged.back();
    merged.pop_back();
  }
  w.outer = std::move(merged);
  return w;
}

// Calls visit(element_offset) for the start of every inner run.
template <class Visit>
void for_each_run(const Walk& w, Visit visit) {
  std::vector<std::int64_t> idx(w.outer.size(), 0);
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

Stats finish(const Acc& acc, const Walk& w, std::int64_t count, bool floating) {
  Stats s;
  s.count = count;
  s.floating = floating;
  s.finite = acc.finite * w.multiplicity;
  s.nan = acc.nan * w.multiplicity;
  s.inf = acc.inf * w.multiplicity;
  if (acc.finite > 0) {
    s.min = acc.min;
    s.max = acc.max;
    s.mean = acc.sum / static_cast<double>(acc.finite);
  }
  return s;
}

std::string check(const TensorView& t) {
  if (t.scalar_type() == ScalarType::Unsupported) {
    return "stats unavailable: no statistics for dtype " + dtype_name(t.dtype());
  }
  if (t.dl().data == nullptr && t.numel() > 0) return "stats unavailable: null data pointer";
  return {};
}

}  // namespace

StatsResult compute_stats(const TensorView& t, device::Backend& backend, const StatsOptions& options) {
  StatsResult r;
  r.unavailable = check(t);
  if (!r.unavailable.empty()) return r;
  const ScalarType type = t.scalar_type();
  const Walk w = normalize(t);
  const std::int64_t es = static_cast<std::int64_t>(t.element_size());
  const std::int64_t chunk = std::max<std::int64_t>(static_cast<std::int64_t>(options.chunk_bytes), es);
  const std::int64_t span = std::min<std::int64_t>(chunk, std::max<std::int64_t>(t.extent().size(), es));
  std::vector<unsigned char> buffer(static_cast<std::size_t>(span));
  Acc acc;
  std::string error;
  if (t.numel() > 0) {
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
  r.stats = finish(acc, w, t.numel(), is_floating(type));
  return r;
}

StatsResult compute_stats(const TensorView& t, const StatsOptions& options) {
  StatsResult r;
  Memory m = t.memory();
  if (m != Memory::Host && m != Memory::Other) {
    if (const std::string* why = device_reads_skipped(device_kind(m))) {
      r.unavailable = "stats skipped: " + *why;
      return r;
    }
    device::Backend* b = device_backend(device_kind(m));
    if (b == nullptr) {
      r.unavailable = std::string("stats unavailable: no backend for ") + device::kind_name(device_kind(m));
      return r;
    }
    return compute_stats(t, *b, options);
  }
  if (m == Memory::Other) {
    r.unavailable = "stats unavailable: cannot read memory of device " + device_name(t.device());
    return r;
  }
  r.unavailable = check(t);
  if (!r.unavailable.empty()) return r;
  const ScalarType type = t.scalar_type();
  const Walk w = normalize(t);
  Acc acc;
  if (t.numel() > 0) {
    const auto* origin = reinterpret_cast<const unsigned char*>(t.origin());
    const std::int64_t es = static_cast<std::int64_t>(t.element_size());
    for_each_run(w, [&](std::int64_t offset) {
      run_kernel(type, origin + offset * es, w.inner.size, w.inner.stride, acc);
    });
  }
  r.stats = finish(acc, w, t.numel(), is_floating(type));
  return r;
}

}  // namespace mate::tensor
