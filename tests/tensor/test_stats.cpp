#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <xmmintrin.h>  // _mm_getcsr, _mm_setcsr
#endif

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "host_memory_device.hpp"
#include "mate/tensor/stats.hpp"
#include "dl_tensor.hpp"

namespace {

using namespace mate::tensor;
using mate::testing::dl_view;
using mate::device::Backend;
using mate::device::Kind;
using mate::device::Status;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// "Device" memory that is really host memory: exercises the chunked path and records the reads;
// `fail` makes every read fail as a driver copy would.
class HostWrappingBackend : public mate::testing::HostMemoryDevice {
 public:
  const char* name() const noexcept override { return "test-cuda"; }
  Status read(void* dst, std::uintptr_t src, std::size_t bytes) noexcept override {
    if (fail) {
      ++reads;
      max_read = std::max(max_read, bytes);
      return {5, "cuMemcpyDtoH"};
    }
    return HostMemoryDevice::read(dst, src, bytes);
  }
  bool fail = false;
};

Stats host_stats(const DLTensor& t) {
  StatsResult r = compute_stats(TensorView(t));
  EXPECT_TRUE(r.stats) << r.unavailable;
  return r.stats.value_or(Stats{});
}

TEST(Conversions, HalfBf16Fp8) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
  EXPECT_EQ(fp8_e4m3fn_to_float(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3fn_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3fn_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(fp8_e4m3fn_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3fn_to_float(0xff)));
  EXPECT_EQ(fp8_e5m2_to_float(0x3c), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x7b), 57344.0f);
  EXPECT_TRUE(std::isinf(fp8_e5m2_to_float(0xfc)));
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_float(0x7d)));
}

TEST(Stats, F32ExcludesNanAndInfFromMinMaxMean) {
  std::vector<float> v{1, kNaN, -3, kInf, 5, -kInf, kNaN, 9, 2, 0, 0, 0, 0, 0, 0, 0, 0, 10};
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(v.size())};
  Stats s = host_stats(dl_view(v.data(), ScalarType::F32, shape));
  EXPECT_EQ(s.count, 18);
  EXPECT_EQ(s.nan, 2);
  EXPECT_EQ(s.inf, 2);
  EXPECT_EQ(s.finite, 14);
  EXPECT_EQ(s.min, -3);
  EXPECT_EQ(s.max, 10);
  EXPECT_DOUBLE_EQ(s.mean, 24.0 / 14);
  EXPECT_TRUE(s.floating);
}

// StatsOptions::layout (the log's tensor line passes the layout it computed) is what the
// statistics go by: the same results as without it, and a layout that says "invalid" is obeyed.
TEST(Stats, UseTheLayoutTheCallerGives) {
  std::vector<float> v{1, 2, 3, 4, 5, 6};
  std::vector<std::int64_t> shape{2, 3};
  const DLTensor t = dl_view(v.data(), ScalarType::F32, shape);
  const TensorView view(t);
  const Layout layout = view.layout();
  StatsOptions options;
  options.layout = &layout;
  const StatsResult given = compute_stats(view, options);
  ASSERT_TRUE(given.stats.has_value()) << given.unavailable;
  EXPECT_EQ(given.stats->count, 6);
  EXPECT_EQ(given.stats->min, 1);
  EXPECT_EQ(given.stats->max, 6);
  EXPECT_DOUBLE_EQ(given.stats->mean, 3.5);
  const Layout invalid{"negative dimension in shape", 0, {}};
  options.layout = &invalid;
  const StatsResult refused = compute_stats(view, options);
  EXPECT_FALSE(refused.stats.has_value());
  EXPECT_NE(refused.unavailable.find("negative dimension in shape"), std::string::npos) << refused.unavailable;
}

TEST(Stats, AllNonFiniteHasNoMinMax) {
  std::vector<double> v{std::nan(""), INFINITY};
  std::vector<std::int64_t> shape{2};
  Stats s = host_stats(dl_view(v.data(), ScalarType::F64, shape));
  EXPECT_EQ(s.finite, 0);
  EXPECT_EQ(s.nan, 1);
  EXPECT_EQ(s.inf, 1);
}

TEST(Stats, SameRuleForHalfBf16AndFp8) {
  std::vector<std::uint16_t> h{0x3c00, 0x7e00, 0xc000, 0x7c00};  // 1, nan, -2, inf
  std::vector<std::uint16_t> b{0x3f80, 0x7fc0, 0xc000, 0x7f80};  // 1, nan, -2, inf
  std::vector<std::uint8_t> e5{0x3c, 0x7d, 0xc0, 0x7c};          // 1, nan, -2, inf
  std::vector<std::uint8_t> e4{0x38, 0x7f, 0xc0, 0x7e};          // 1, nan, -2, 448
  std::vector<std::int64_t> shape{4};
  for (auto [data, type] : {std::pair<const void*, ScalarType>{h.data(), ScalarType::F16},
                            {b.data(), ScalarType::BF16}, {e5.data(), ScalarType::F8E5M2}}) {
    Stats s = host_stats(dl_view(data, type, shape));
    EXPECT_EQ(s.nan, 1) << static_cast<int>(type);
    EXPECT_EQ(s.inf, 1) << static_cast<int>(type);
    EXPECT_EQ(s.min, -2);
    EXPECT_EQ(s.max, 1);
    EXPECT_DOUBLE_EQ(s.mean, -0.5);
  }
  Stats s = host_stats(dl_view(e4.data(), ScalarType::F8E4M3, shape));
  EXPECT_EQ(s.nan, 1);
  EXPECT_EQ(s.inf, 0);
  EXPECT_EQ(s.max, 448);
}

TEST(Stats, IntegersAndBool) {
  std::vector<std::int32_t> i{-7, 3, 100, 0};
  std::vector<std::uint8_t> u{255, 1};
  std::vector<std::uint8_t> bools{1, 0, 1, 1};
  std::vector<std::int64_t> s4{4}, s2{2};
  Stats a = host_stats(dl_view(i.data(), ScalarType::I32, s4));
  EXPECT_EQ(a.min, -7);
  EXPECT_EQ(a.max, 100);
  EXPECT_DOUBLE_EQ(a.mean, 24);
  EXPECT_FALSE(a.floating);
  Stats b = host_stats(dl_view(u.data(), ScalarType::U8, s2));
  EXPECT_EQ(b.max, 255);
  EXPECT_EQ(b.mean, 128);
  Stats c = host_stats(dl_view(bools.data(), ScalarType::Bool, s4));
  EXPECT_EQ(c.min, 0);
  EXPECT_EQ(c.max, 1);
  EXPECT_DOUBLE_EQ(c.mean, 0.75);
}

// A strided view only visits its own elements: fill the gaps with values that would show.
TEST(Stats, NonContiguousNegativeAndBroadcastStrides) {
  std::vector<float> buf(24, 1000.0f);
  // 3x4 view with row stride 8, column stride -2, origin at element 6 of each row.
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) buf[static_cast<std::size_t>(r * 8 + 6 - 2 * c)] = static_cast<float>(r * 4 + c);
  std::vector<std::int64_t> shape{3, 4}, strides{8, -2};
  Stats s = host_stats(dl_view(buf.data(), ScalarType::F32, shape, &strides, 6 * sizeof(float)));
  EXPECT_EQ(s.count, 12);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 11);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);

  std::vector<float> row{1, kNaN, 3};
  std::vector<std::int64_t> bshape{5, 3}, bstrides{0, 1};
  Stats b = host_stats(dl_view(row.data(), ScalarType::F32, bshape, &bstrides));
  EXPECT_EQ(b.count, 15);
  EXPECT_EQ(b.nan, 5);
  EXPECT_EQ(b.finite, 10);
  EXPECT_DOUBLE_EQ(b.mean, 2);
}

TEST(Stats, DeviceTensorsAreReadInBoundedChunks) {
  std::vector<float> buf(1000);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i);
  buf[500] = kNaN;
  std::vector<std::int64_t> shape{1000};
  DLTensor t = dl_view(buf.data(), ScalarType::F32, shape, nullptr, 0, {kDLCUDA, 0});
  HostWrappingBackend backend;
  StatsResult r = compute_stats(TensorView(t), backend, StatsOptions{256});
  ASSERT_TRUE(r.stats) << r.unavailable;
  EXPECT_LE(backend.max_read, 256u);
  EXPECT_EQ(backend.reads, 16u);  // ceil(4000 / 256)
  EXPECT_EQ(r.stats->nan, 1);
  EXPECT_EQ(r.stats->max, 999);
  Stats host = host_stats(dl_view(buf.data(), ScalarType::F32, shape));
  EXPECT_EQ(host.mean, r.stats->mean);  // the same rule on every path

  // A transposed device view: the chunked walk agrees with the host walk.
  std::vector<std::int64_t> tshape{25, 40}, tstrides{1, 25};
  DLTensor tt = dl_view(buf.data(), ScalarType::F32, tshape, &tstrides, 0, {kDLCUDA, 0});
  HostWrappingBackend b2;
  StatsResult rt = compute_stats(TensorView(tt), b2, StatsOptions{64});
  ASSERT_TRUE(rt.stats);
  EXPECT_LE(b2.max_read, 64u);
  EXPECT_EQ(rt.stats->nan, 1);
  EXPECT_EQ(rt.stats->min, 0);
  EXPECT_EQ(rt.stats->max, 999);
  EXPECT_NEAR(rt.stats->mean, host.mean, 1e-9);
}

TEST(Stats, DeviceWithoutBackendOrFailingReadIsUnavailableNotACrash) {
  std::vector<float> buf(4);
  std::vector<std::int64_t> shape{4};
  DLTensor t = dl_view(buf.data(), ScalarType::F32, shape, nullptr, 0, {kDLCUDA, 0});
  set_device_backend(Kind::Cuda, nullptr);
  StatsResult r = compute_stats(TensorView(t));
  EXPECT_FALSE(r.stats);
  EXPECT_EQ(r.unavailable, "stats unavailable: no backend for cuda:0");

  HostWrappingBackend backend;
  set_device_backend(Kind::Cuda, &backend);
  EXPECT_TRUE(compute_stats(TensorView(t)).stats);
  backend.fail = true;
  StatsResult f = compute_stats(TensorView(t));
  EXPECT_FALSE(f.stats);
  EXPECT_NE(f.unavailable.find("test-cuda read failed (cuMemcpyDtoH, code 5)"), std::string::npos);
  set_device_backend(Kind::Cuda, nullptr);

  DLTensor null_data = t;
  null_data.device = {kDLCPU, 0};
  null_data.data = nullptr;
  EXPECT_EQ(compute_stats(TensorView(null_data)).unavailable, "stats unavailable: null data pointer");

  DLTensor v = t;
  v.device = {kDLCPU, 0};
  v.dtype = DLDataType{kDLComplex, 64, 1};
  EXPECT_EQ(compute_stats(TensorView(v)).unavailable,
            "stats unavailable: no statistics for dtype dlpack(code=5,bits=64,lanes=1)");
}

}  // namespace

namespace {

// Long runs go through the blocked kernels (all-finite fast blocks, re-classified blocks);
// compare with a plain double reference for every float dtype that has them.
TEST(Stats, LongRunsAgreeWithAReferenceWithAndWithoutNonFiniteValues) {
  constexpr int kN = 5000;
  for (bool poison : {false, true}) {
    std::vector<float> f(kN);
    std::vector<std::uint16_t> b(kN), h(kN);
    std::map<float, std::uint16_t> to_half;
    for (int bits = 0; bits < 0x7c00; ++bits) to_half.emplace(half_to_float(static_cast<std::uint16_t>(bits)), bits);
    for (int bits = 0x8001; bits < 0xfc00; ++bits) to_half.emplace(half_to_float(static_cast<std::uint16_t>(bits)), bits);
    for (int i = 0; i < kN; ++i) {
      f[i] = static_cast<float>((i * 37) % 211) - 100.0f;  // exact in bf16 and f16 too
      b[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f[i]) >> 16);
      h[i] = to_half.at(f[i]);
    }
    if (poison) {
      f[4000] = kInf;
      b[4000] = 0x7f80;
      h[4000] = 0x7c00;
      f[17] = kNaN;
      b[17] = 0x7fc0;
      h[17] = 0x7e00;
    }
    double sum = 0, mn = 1e30, mx = -1e30;
    std::int64_t finite = 0;
    for (float v : f) {
      if (!std::isfinite(v)) continue;
      sum += v;
      mn = std::min<double>(mn, v);
      mx = std::max<double>(mx, v);
      ++finite;
    }
    std::vector<std::int64_t> shape{kN};
    for (auto [data, type] : {std::pair<const void*, ScalarType>{f.data(), ScalarType::F32},
                              {b.data(), ScalarType::BF16}, {h.data(), ScalarType::F16}}) {
      Stats s = host_stats(dl_view(data, type, shape));
      EXPECT_EQ(s.finite, finite);
      EXPECT_EQ(s.nan, poison ? 1 : 0);
      EXPECT_EQ(s.inf, poison ? 1 : 0);
      EXPECT_EQ(s.min, mn);
      EXPECT_EQ(s.max, mx);
      EXPECT_NEAR(s.mean, sum / static_cast<double>(finite), 1e-9);
    }
  }
}

// A malformed DLTensor (a negative size, a count beyond 64 bits) has no statistics, and says why:
// nothing is read of memory that is not there.
TEST(Stats, AnInvalidLayoutReadsNothingAndSaysWhy) {
  std::int32_t v[4] = {1, 2, 3, 4};
  for (ScalarType type : {ScalarType::I32, ScalarType::F32}) {
    std::vector<std::int64_t> negative{-1}, huge{std::int64_t{1} << 62, 8};
    StatsResult r = compute_stats(TensorView(dl_view(v, type, negative)));
    EXPECT_FALSE(r.stats);
    EXPECT_EQ(r.unavailable, "stats unavailable: invalid layout (negative dimension in shape)");
    r = compute_stats(TensorView(dl_view(v, type, huge)));
    EXPECT_FALSE(r.stats);
    EXPECT_EQ(r.unavailable, "stats unavailable: invalid layout (element count overflows 64 bits)");
  }
}

// Values near the type's maximum: a contiguous block's lane sums (kept in the element type for
// speed) overflow; the mean must be the one the strided path gives, never Inf. f32 and bf16
// (the two whose lane sums are f32), contiguous and every other element of a larger buffer,
// with a run short of one block, several blocks, and cancelling signs.
TEST(Stats, ValuesNearTheMaximumHaveTheSameFiniteMeanContiguousAndStrided) {
  const float big = 2e38f;
  const std::uint16_t big_bf16 = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(big) >> 16);
  const double big_as_bf16 = bf16_to_float(big_bf16);
  for (int n : {32, 5000}) {
    for (bool cancel : {false, true}) {
      // The same values packed, and at every other element of a buffer twice as long.
      std::vector<float> f(n), f2(2 * n, 1.0f);
      std::vector<std::uint16_t> b(n), b2(2 * n, 0x3f80);
      double fsum = 0, bsum = 0;
      for (int i = 0; i < n; ++i) {
        const bool negative = cancel && i % 4 >= 2;  // ++-- : lanes overflow on the way, then cancel
        f[i] = f2[2 * i] = negative ? -big : big;
        b[i] = b2[2 * i] = static_cast<std::uint16_t>(big_bf16 | (negative ? 0x8000 : 0));
        fsum += negative ? -static_cast<double>(big) : big;
        bsum += negative ? -big_as_bf16 : big_as_bf16;
      }
      std::vector<std::int64_t> shape{n}, every_other{2};
      for (auto [data, spread, type, sum] :
           {std::tuple<const void*, const void*, ScalarType, double>{f.data(), f2.data(), ScalarType::F32, fsum},
            {b.data(), b2.data(), ScalarType::BF16, bsum}}) {
        SCOPED_TRACE(dtype_name(dl_view(data, type, shape).dtype) + " n=" + std::to_string(n) +
                     (cancel ? " cancelling" : ""));
        const Stats contiguous = host_stats(dl_view(data, type, shape));
        const Stats strided = host_stats(dl_view(spread, type, shape, &every_other));
        EXPECT_EQ(contiguous.finite, n);
        EXPECT_EQ(strided.finite, n);
        EXPECT_TRUE(std::isfinite(contiguous.mean)) << contiguous.mean;
        EXPECT_DOUBLE_EQ(contiguous.mean, sum / n);
        EXPECT_DOUBLE_EQ(strided.mean, sum / n);
      }
    }
  }
}

constexpr StatsKernels kKernelBuilds[] = {StatsKernels::Baseline, StatsKernels::Avx2, StatsKernels::Avx512};

// Runs `check` with each build of the kernels this CPU runs (the baseline one at least).
template <class Check>
void with_each_kernel_build(Check check) {
  for (StatsKernels set : kKernelBuilds) {
    if (!stats_kernels_supported(set)) continue;
    SCOPED_TRACE(std::string(stats_kernels_name(set)) + " kernels");
    use_stats_kernels_for_testing(set);
    check();
  }
  use_stats_kernels_for_testing(StatsKernels::Automatic);
}

// Zeros in min and max: -0 below +0 (IEEE 754's minimum and maximum), whatever the path: the
// vector kernels (contiguous blocks of finite values), the classifying one (every other element;
// a block that holds a NaN or an Inf of either sign, which must not count), in every build, for
// every floating dtype, within one vector and across blocks (2048 elements). A zero minimum is
// -0 exactly when a -0 is there, a zero maximum +0 exactly when a +0 is.
TEST(Stats, ZerosOrderMinusBelowPlusWhateverThePath) {
  struct Format {
    ScalarType type;
    int bytes;
    std::uint64_t one, nan, inf;  // the patterns of +1, a NaN and +Inf (0: none); the sign is the top bit
  };
  const Format formats[] = {{ScalarType::F64, 8, 0x3ff0000000000000u, 0x7ff8000000000000u, 0x7ff0000000000000u},
                            {ScalarType::F32, 4, 0x3f800000u, 0x7fc00000u, 0x7f800000u},
                            {ScalarType::F16, 2, 0x3c00u, 0x7e00u, 0x7c00u},
                            {ScalarType::BF16, 2, 0x3f80u, 0x7fc0u, 0x7f80u},
                            {ScalarType::F8E4M3, 1, 0x38u, 0x7fu, 0u},
                            {ScalarType::F8E5M2, 1, 0x3cu, 0x7eu, 0x7cu}};
  enum class Zeros { AllPlus, AllMinus, OneMinus, OnePlus };  // OneX: one zero of that sign, the rest the other
  enum class Extra { None, PlusOne, MinusOne };                // a +1 last, a -1 first (over a zero)
  with_each_kernel_build([&] {
    for (const Format& f : formats) {
      const std::uint64_t sign = std::uint64_t{1} << (8 * f.bytes - 1);
      // Appended after the n values by the views that read one more element.
      std::vector<std::pair<const char*, std::uint64_t>> non_finite{{"NaN", f.nan}, {"-NaN", f.nan | sign}};
      if (f.inf != 0) non_finite.insert(non_finite.end(), {{"+Inf", f.inf}, {"-Inf", f.inf | sign}});
      for (std::int64_t n : {5, 64, 70, 3000}) {
        for (Zeros zeros : {Zeros::AllPlus, Zeros::AllMinus, Zeros::OneMinus, Zeros::OnePlus}) {
          for (std::int64_t at : {std::int64_t{0}, std::int64_t{1}, n / 2, n - 2, n - 1}) {
            for (Extra extra : {Extra::None, Extra::PlusOne, Extra::MinusOne}) {
              std::vector<std::uint64_t> values(static_cast<std::size_t>(n));
              for (std::int64_t i = 0; i < n; ++i) {
                bool minus = zeros == Zeros::AllMinus || zeros == Zeros::OnePlus;
                if (i == at && (zeros == Zeros::OneMinus || zeros == Zeros::OnePlus)) minus = !minus;
                values[static_cast<std::size_t>(i)] = minus ? sign : 0;
              }
              if (extra == Extra::PlusOne) values.back() = f.one;
              if (extra == Extra::MinusOne) values.front() = f.one | sign;
              // What is left after the extra value took its place (it may have been the one zero).
              const bool any_minus = std::find(values.begin(), values.end(), sign) != values.end();
              const bool any_plus = std::find(values.begin(), values.end(), std::uint64_t{0}) != values.end();
              const double min = extra == Extra::MinusOne ? -1.0 : (any_minus ? -0.0 : 0.0);
              const double max = extra == Extra::PlusOne ? 1.0 : (any_plus ? 0.0 : -0.0);
              // The values packed (room for one more); and at every other element of a buffer
              // whose skipped elements are 0x3c bytes (a positive non-zero value in every format).
              std::vector<unsigned char> packed(static_cast<std::size_t>((n + 1) * f.bytes)),
                  spread(static_cast<std::size_t>(2 * n * f.bytes), 0x3c);
              for (std::int64_t i = 0; i < n; ++i) {
                const auto bytes = static_cast<std::size_t>(f.bytes);
                std::memcpy(&packed[static_cast<std::size_t>(i) * bytes], &values[static_cast<std::size_t>(i)], bytes);
                std::memcpy(&spread[static_cast<std::size_t>(2 * i) * bytes], &values[static_cast<std::size_t>(i)], bytes);
              }
              std::vector<std::int64_t> shape{n}, with_one_more{n + 1}, two{2};
              auto check = [&](const DLTensor& t, const std::string& what) {
                SCOPED_TRACE(dtype_name(t.dtype) + " n=" + std::to_string(n) + " zeros " + std::to_string(static_cast<int>(zeros)) +
                             " at " + std::to_string(at) + " extra " + std::to_string(static_cast<int>(extra)) + " " + what);
                const Stats s = host_stats(t);
                EXPECT_EQ(s.min, min);
                EXPECT_EQ(std::signbit(s.min), std::signbit(min));
                EXPECT_EQ(s.max, max);
                EXPECT_EQ(std::signbit(s.max), std::signbit(max));
              };
              check(dl_view(packed.data(), f.type, shape), "contiguous");
              check(dl_view(spread.data(), f.type, shape, &two), "every other element");
              for (const auto& [name, pattern] : non_finite) {
                std::memcpy(&packed[static_cast<std::size_t>(n * f.bytes)], &pattern, static_cast<std::size_t>(f.bytes));
                check(dl_view(packed.data(), f.type, with_one_more), std::string("with a ") + name);
              }
            }
          }
        }
      }
    }
  });
}

// The vector kernels against a one-element-at-a-time reference, for every packed float format:
// lengths around the vector width, the block size (2048) and odd tails; patterns drawn from the
// whole format (subnormals included), alone or mixed with NaN, Inf, -0.0 and +0.0.
struct PackedFormat {
  ScalarType type;
  int bytes;
  float (*to_float)(std::uint32_t);
  std::vector<std::uint32_t> specials;  // NaN, Inf (where the format has it), -0.0, +0.0
};

void check_packed_format(const PackedFormat& f, std::mt19937& rng) {
  for (std::int64_t n : {0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 65, 2047, 2048, 2049, 4096 + 45}) {
    for (bool mixed : {false, true}) {
      std::vector<std::uint32_t> patterns(static_cast<std::size_t>(n));
      for (auto& b : patterns) {
        do {
          b = rng() & (f.bytes == 2 ? 0xffffu : 0xffu);
        } while (!std::isfinite(f.to_float(b)));  // finite patterns here, specials below
        if (mixed && rng() % 16 == 0) b = f.specials[rng() % f.specials.size()];
      }
      std::vector<unsigned char> data(static_cast<std::size_t>(n * f.bytes));
      for (std::size_t i = 0; i < patterns.size(); ++i) std::memcpy(&data[i * f.bytes], &patterns[i], f.bytes);
      double sum = 0, magnitude = 0, mn = INFINITY, mx = -INFINITY;
      std::int64_t finite = 0, nan = 0, inf = 0;
      for (std::uint32_t b : patterns) {
        const double v = f.to_float(b);
        if (std::isnan(v)) {
          ++nan;
        } else if (std::isinf(v)) {
          ++inf;
        } else {
          ++finite;
          sum += v;
          magnitude += std::fabs(v);
          mn = std::min(mn, v);
          mx = std::max(mx, v);
        }
      }
      std::vector<std::int64_t> shape{n};
      SCOPED_TRACE(dtype_name(dl_view(data.data(), f.type, shape).dtype) + " n=" + std::to_string(n) +
                   (mixed ? " mixed" : ""));
      const Stats s = host_stats(dl_view(data.data(), f.type, shape));
      EXPECT_EQ(s.count, n);
      EXPECT_EQ(s.finite, finite);
      EXPECT_EQ(s.nan, nan);
      EXPECT_EQ(s.inf, inf);
      if (finite == 0) continue;
      EXPECT_EQ(s.min, mn);
      EXPECT_EQ(s.max, mx);
      // Lane sums are f32: within a few ulps of the sum of the magnitudes.
      EXPECT_NEAR(s.mean, sum / static_cast<double>(finite), 1e-6 * magnitude / static_cast<double>(finite));
    }
  }
}

TEST(Stats, PackedFloatFormatsAgreeWithAReferenceAtEveryLength) {
  const std::vector<PackedFormat> formats{
      {ScalarType::BF16, 2, [](std::uint32_t b) { return bf16_to_float(static_cast<std::uint16_t>(b)); },
       {0x7fc0, 0xffc1, 0x7f80, 0xff80, 0x8000, 0x0000}},
      {ScalarType::F16, 2, [](std::uint32_t b) { return half_to_float(static_cast<std::uint16_t>(b)); },
       {0x7e00, 0xfc01, 0x7c00, 0xfc00, 0x8000, 0x0000}},
      {ScalarType::F8E5M2, 1, [](std::uint32_t b) { return fp8_e5m2_to_float(static_cast<std::uint8_t>(b)); },
       {0x7d, 0xff, 0x7c, 0xfc, 0x80, 0x00}},
      {ScalarType::F8E4M3, 1, [](std::uint32_t b) { return fp8_e4m3fn_to_float(static_cast<std::uint8_t>(b)); },
       {0x7f, 0xff, 0x80, 0x00}},
  };
  with_each_kernel_build([&] {
    std::mt19937 rng(7);
    for (const PackedFormat& f : formats) check_packed_format(f, rng);
  });
}

// -0.0 sorts below +0.0 as the minimum; zeros of both signs are finite.
TEST(Stats, SignedZerosInHalfAndBf16) {
  std::vector<std::uint16_t> h{0x0000, 0x8000, 0x0000}, b{0x0000, 0x8000, 0x0000};
  std::vector<std::int64_t> shape{3};
  for (auto [data, type] : {std::pair<const void*, ScalarType>{h.data(), ScalarType::F16}, {b.data(), ScalarType::BF16}}) {
    const Stats s = host_stats(dl_view(data, type, shape));
    EXPECT_EQ(s.finite, 3);
    EXPECT_EQ(s.min, 0.0);
    EXPECT_TRUE(std::signbit(s.min));
    EXPECT_FALSE(std::signbit(s.max));
    EXPECT_EQ(s.mean, 0.0);
  }
}

// Integers: min, max and an exact mean (the sum is exact, rounded once) for every integer type,
// with the type's extremes, at lengths around the vector width and the blocks; contiguous and
// every other element.
template <class T>
void check_integer_type(ScalarType type, std::mt19937_64& rng) {
  for (std::int64_t n : {1, 3, 31, 32, 33, 100, 4097, (1 << 15) + 77}) {
    std::vector<T> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = static_cast<T>(rng());
    v[static_cast<std::size_t>(rng() % n)] = std::numeric_limits<T>::max();
    v[static_cast<std::size_t>(rng() % n)] = std::numeric_limits<T>::lowest();
    __int128 sum = 0, strided_sum = 0;
    T mn = std::numeric_limits<T>::max(), mx = std::numeric_limits<T>::lowest();
    for (std::size_t i = 0; i < v.size(); ++i) {
      sum += v[i];
      if (i % 2 == 0 && static_cast<std::int64_t>(i) < n / 2 * 2) strided_sum += v[i];
      mn = std::min(mn, v[i]);
      mx = std::max(mx, v[i]);
    }
    std::vector<std::int64_t> shape{n}, half{n / 2}, two{2};
    SCOPED_TRACE(dtype_name(dl_view(v.data(), type, shape).dtype) + " n=" + std::to_string(n));
    const Stats s = host_stats(dl_view(v.data(), type, shape));
    EXPECT_EQ(s.finite, n);
    EXPECT_EQ(s.min, static_cast<double>(mn));
    EXPECT_EQ(s.max, static_cast<double>(mx));
    EXPECT_EQ(s.mean, static_cast<double>(sum) / static_cast<double>(n));
    if (n / 2 > 0) {
      const Stats t = host_stats(dl_view(v.data(), type, half, &two));
      EXPECT_EQ(t.mean, static_cast<double>(strided_sum) / static_cast<double>(n / 2));
    }
  }
}

TEST(Stats, IntegersHaveExactMeansAndExtremesAtEveryLength) {
  with_each_kernel_build([] {
    std::mt19937_64 rng(11);
    check_integer_type<std::int8_t>(ScalarType::I8, rng);
    check_integer_type<std::int16_t>(ScalarType::I16, rng);
    check_integer_type<std::int32_t>(ScalarType::I32, rng);
    check_integer_type<std::int64_t>(ScalarType::I64, rng);
    check_integer_type<std::uint8_t>(ScalarType::U8, rng);
    check_integer_type<std::uint16_t>(ScalarType::U16, rng);
    check_integer_type<std::uint32_t>(ScalarType::U32, rng);
    check_integer_type<std::uint64_t>(ScalarType::U64, rng);
  });
}

TEST(Stats, BoolCountsEveryNonZeroByteAsOne) {
  with_each_kernel_build([] {
    for (std::int64_t n : {5, 32, 33, 1000}) {
      std::vector<std::uint8_t> v(static_cast<std::size_t>(n));
      std::int64_t ones = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        v[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i % 3 == 0 ? 0 : (i * 37) % 256);
        ones += v[static_cast<std::size_t>(i)] != 0;
      }
      std::vector<std::int64_t> shape{n};
      const Stats s = host_stats(dl_view(v.data(), ScalarType::Bool, shape));
      EXPECT_EQ(s.min, 0);
      EXPECT_EQ(s.max, 1);
      EXPECT_EQ(s.mean, static_cast<double>(ones) / static_cast<double>(n));
    }
  });
}

// The statistics of `t` by each build of the kernels this CPU runs, baseline first.
std::vector<std::pair<StatsKernels, Stats>> stats_by_each_build(const DLTensor& t) {
  std::vector<std::pair<StatsKernels, Stats>> by;
  for (StatsKernels set : kKernelBuilds) {
    if (!stats_kernels_supported(set)) continue;
    use_stats_kernels_for_testing(set);
    by.emplace_back(set, host_stats(t));
  }
  use_stats_kernels_for_testing(StatsKernels::Automatic);
  return by;
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

// Each build's statistics of `t` are the baseline's, bit for bit.
void expect_every_build_like_the_baseline(const DLTensor& t) {
  const auto by = stats_by_each_build(t);
  const Stats& base = by.front().second;
  for (const auto& [set, s] : by) {
    SCOPED_TRACE(std::string(stats_kernels_name(set)) + " kernels against the baseline's");
    EXPECT_EQ(s.count, base.count);
    EXPECT_EQ(s.finite, base.finite);
    EXPECT_EQ(s.nan, base.nan);
    EXPECT_EQ(s.inf, base.inf);
    EXPECT_TRUE(same_bits(s.min, base.min)) << s.min << " vs " << base.min;
    EXPECT_TRUE(same_bits(s.max, base.max)) << s.max << " vs " << base.max;
    EXPECT_TRUE(same_bits(s.mean, base.mean)) << s.mean << " vs " << base.mean;
  }
}

// Every build of the kernels gives the baseline's statistics (32-byte vectors as two 16-byte
// halves where the build has no wider ones), bit for bit, for every dtype: each lane gets the
// same elements, in the same order, and lanes are combined in the same order; or the sum is
// exact (e4m3 on the AVX-512 build). Values drawn from the whole bit range of each dtype (so some
// blocks hold NaN and Inf), at lengths around the vector widths and the block size, contiguous
// and every other element.
TEST(Stats, EveryKernelBuildGivesTheBaselinesResultsForEveryDtype) {
  if (!stats_kernels_supported(StatsKernels::Avx2)) GTEST_SKIP() << "the baseline kernels are the only ones run here";
  const std::vector<std::pair<ScalarType, int>> dtypes{
      {ScalarType::F64, 8}, {ScalarType::F32, 4}, {ScalarType::F16, 2}, {ScalarType::BF16, 2},
      {ScalarType::F8E4M3, 1}, {ScalarType::F8E5M2, 1}, {ScalarType::I8, 1}, {ScalarType::I16, 2},
      {ScalarType::I32, 4}, {ScalarType::I64, 8}, {ScalarType::U8, 1}, {ScalarType::U16, 2},
      {ScalarType::U32, 4}, {ScalarType::U64, 8}, {ScalarType::Bool, 1}};
  std::mt19937_64 rng(23);
  for (auto [type, bytes] : dtypes) {
    for (std::int64_t n : {1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 2047, 2048, 2049, 5000}) {
      for (bool sparse_specials : {false, true}) {
        // Bytes of 2n elements (the strided view reads every other one); `sparse_specials` keeps
        // floating values finite but for one in 64 (so most blocks take the vector path).
        std::vector<unsigned char> data(static_cast<std::size_t>(2 * n * bytes));
        for (auto& b : data) b = static_cast<unsigned char>(rng());
        if (sparse_specials && bytes >= 2 && is_floating(type)) {
          for (std::int64_t i = 0; i < 2 * n; ++i) {
            unsigned char& top = data[static_cast<std::size_t>((i + 1) * bytes - 1)];
            if (rng() % 64 != 0) top &= 0x3f;  // sign kept, exponent well below the maximum
          }
        }
        if (sparse_specials && bytes == 1 && is_floating(type)) {  // fp8: one NaN or Inf pattern in 512 kept
          for (auto& b : data)
            if ((b & 0x7f) >= 0x7c && rng() % 512 != 0) b &= 0xbb;
        }
        std::vector<std::int64_t> shape{n}, two{2};
        for (bool strided : {false, true}) {
          const DLTensor t = strided ? dl_view(data.data(), type, shape, &two) : dl_view(data.data(), type, shape);
          SCOPED_TRACE(dtype_name(t.dtype) + " n=" + std::to_string(n) + (strided ? " strided" : "") +
                       (sparse_specials ? " mostly finite" : ""));
          expect_every_build_like_the_baseline(t);
        }
      }
    }
  }
}

// The statistics use the widest build this CPU runs.
TEST(Stats, TheWidestBuildThisCpuRunsIsInUse) {
  const StatsKernels in_use = stats_kernels_in_use();
  EXPECT_TRUE(stats_kernels_supported(in_use));
  EXPECT_NE(in_use, StatsKernels::Automatic);
  const StatsKernels wider[] = {StatsKernels::Avx512, StatsKernels::Avx2, StatsKernels::Baseline};
  for (StatsKernels set : wider) {
    if (!stats_kernels_supported(set)) continue;
    EXPECT_EQ(in_use, set) << stats_kernels_name(in_use) << " in use, " << stats_kernels_name(set) << " runs here";
    break;
  }
}

// e4m3's sums are exact in every build (the AVX-512 one sums integers of 2^-9 units, the others
// f32 lanes that cannot round): at the format's largest values, with subnormals, and across
// block boundaries (2048 elements), the mean is the exact one.
TEST(Stats, E4m3MeansAreExactAtTheFormatsExtremes) {
  struct Case {
    std::uint8_t a, b;  // alternating patterns
    double mean;        // of an even count of them
  };
  const Case cases[] = {
      {0x7e, 0x7e, 448.0},                    // the largest value
      {0xfe, 0xfe, -448.0},
      {0x7e, 0xfe, 0.0},
      {0x7e, 0x01, (448.0 + 0x1p-9) / 2},     // the largest and the smallest subnormal
      {0x07, 0x87, 0.0},                      // the largest subnormals, both signs
      {0x08, 0x07, (0x1p-6 + 7 * 0x1p-9) / 2},  // the smallest normal and the largest subnormal
  };
  with_each_kernel_build([&] {
    for (const Case& c : cases) {
      for (std::int64_t n : {2, 64, 128, 130, 2048, 4096 + 64 + 2, 3 * 2048}) {
        std::vector<std::uint8_t> data(static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < data.size(); ++i) data[i] = i % 2 == 0 ? c.a : c.b;
        std::vector<std::int64_t> shape{n};
        SCOPED_TRACE(::testing::Message() << std::hex << "patterns 0x" << int{c.a} << ", 0x" << int{c.b} << std::dec
                                          << " n=" << n);
        const Stats st = host_stats(dl_view(data.data(), ScalarType::F8E4M3, shape));
        EXPECT_EQ(st.finite, n);
        EXPECT_EQ(st.mean, c.mean);
        EXPECT_EQ(st.max, std::max(fp8_e4m3fn_to_float(c.a), fp8_e4m3fn_to_float(c.b)));
        EXPECT_EQ(st.min, std::min(fp8_e4m3fn_to_float(c.a), fp8_e4m3fn_to_float(c.b)));
      }
    }
  });
}

// e4m3, every pair of patterns in a block (one of them once, in the 64-byte part or in the tail),
// in every build, against a reference: NaN count, min and max bit for bit (-0 below +0), and
// the exact mean. (A +0 for -0 in the AVX-512 build's min passed every other test.)
TEST(Stats, E4m3EveryPairOfPatternsInEveryBuild) {
  with_each_kernel_build([] {
    for (int a = 0; a < 256; ++a) {
      for (int b = 0; b < 256; ++b) {
        for (std::int64_t at : {77, 129}) {  // in the vector part of 128 elements, in the tail of 130
          const std::int64_t n = at < 128 ? 128 : 130;
          std::vector<std::uint8_t> d(static_cast<std::size_t>(n), static_cast<std::uint8_t>(a));
          d[static_cast<std::size_t>(at)] = static_cast<std::uint8_t>(b);
          std::int64_t nan = 0, finite = 0;
          double sum = 0, mn = INFINITY, mx = -INFINITY;
          for (std::uint8_t v : d) {
            const double x = fp8_e4m3fn_to_float(v);
            if (std::isnan(x)) {
              ++nan;
              continue;
            }
            ++finite;
            sum += x;  // exact: whole multiples of 2^-9
            if (x < mn || (x == mn && std::signbit(x))) mn = x;
            if (x > mx || (x == mx && !std::signbit(x))) mx = x;
          }
          std::vector<std::int64_t> shape{n};
          const Stats s = host_stats(dl_view(d.data(), ScalarType::F8E4M3, shape));
          ASSERT_EQ(s.nan, nan) << a << ", " << b;
          ASSERT_EQ(s.finite, finite) << a << ", " << b;
          if (finite == 0) continue;
          ASSERT_TRUE(same_bits(s.min, mn)) << "patterns " << a << ", " << b << ": " << s.min << " vs " << mn;
          ASSERT_TRUE(same_bits(s.max, mx)) << "patterns " << a << ", " << b << ": " << s.max << " vs " << mx;
          ASSERT_EQ(s.mean, sum / static_cast<double>(finite)) << a << ", " << b;
        }
      }
    }
  });
}

// e4m3, random finite patterns of every magnitude (and the largest with the smallest, both
// signs), mixed within each lane: the exact mean in every build.
TEST(Stats, E4m3RandomValuesHaveTheExactMeanInEveryBuild) {
  with_each_kernel_build([] {
    std::mt19937 rng(5);
    for (std::int64_t n : {63, 64, 65, 2047, 2048, 2049, 10000}) {
      for (int round = 0; round < 12; ++round) {
        std::vector<std::uint8_t> d(static_cast<std::size_t>(n));
        double sum = 0;  // exact: whole multiples of 2^-9 below 2^40
        for (auto& v : d) {
          do v = static_cast<std::uint8_t>(rng());
          while ((v & 0x7f) == 0x7f);
          if (round < 4) v = static_cast<std::uint8_t>((v & 0x80) | (rng() % 2 != 0 ? 0x7e : 0x01));
          sum += fp8_e4m3fn_to_float(v);
        }
        std::vector<std::int64_t> shape{n};
        const Stats s = host_stats(dl_view(d.data(), ScalarType::F8E4M3, shape));
        ASSERT_EQ(s.mean, sum / static_cast<double>(n)) << "n=" << n << " round " << round;
      }
    }
  });
}

// No build reads past a tensor's end: data that ends where an unreadable page begins, every
// dtype, every length up to 300 elements and then some to past two blocks (a read past the end
// faults, and the statistics say "not readable").
TEST(Stats, NoBuildReadsPastTheEnd) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), span = 16 * page;
  auto* m = static_cast<unsigned char*>(::mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(m, MAP_FAILED);
  ASSERT_EQ(::mprotect(m + span, page, PROT_NONE), 0);
  std::mt19937 rng(3);
  for (std::size_t i = 0; i < span; ++i) m[i] = static_cast<unsigned char>(rng());
  const std::vector<std::pair<ScalarType, int>> dtypes{
      {ScalarType::F64, 8}, {ScalarType::F32, 4}, {ScalarType::F16, 2}, {ScalarType::BF16, 2},
      {ScalarType::F8E4M3, 1}, {ScalarType::F8E5M2, 1}, {ScalarType::I8, 1}, {ScalarType::I16, 2},
      {ScalarType::I32, 4}, {ScalarType::I64, 8}, {ScalarType::U8, 1}, {ScalarType::Bool, 1}};
  with_each_kernel_build([&] {
    for (auto [type, bytes] : dtypes) {
      for (std::int64_t n = 1; n <= 4200 && n * bytes <= static_cast<std::int64_t>(span); n += n < 300 ? 1 : 37) {
        std::vector<std::int64_t> shape{n};
        const StatsResult r = compute_stats(TensorView(dl_view(m + span - n * bytes, type, shape)));
        ASSERT_TRUE(r.stats.has_value()) << dtype_name(dl_view(m, type, shape).dtype) << " n=" << n << ": " << r.unavailable;
        EXPECT_EQ(r.stats->count, n);
      }
    }
  });
  ::munmap(m, span + page);
}

// The statistics raise exception flags of their own (inexact sums and means, NaN operands): none
// reaches the caller, whose own flags stay as they were, whatever the dtype and kernel build.
TEST(Stats, TheCallersExceptionFlagsAreLeftAsTheyWere) {
  std::vector<float> f32 = {0.1f, std::numeric_limits<float>::quiet_NaN(), 3e38f, 3e38f, 1e-40f, -0.3f, 7.0f};
  std::vector<std::uint16_t> bf16 = {0x3dcd, 0x7fc0, 0x7f7f, 0x0001, 0xbe9a};
  std::vector<std::int64_t> n32{static_cast<std::int64_t>(f32.size())}, n16{static_cast<std::int64_t>(bf16.size())};
  with_each_kernel_build([&] {
    for (int caller : {0, FE_OVERFLOW | FE_DIVBYZERO}) {
      std::feclearexcept(FE_ALL_EXCEPT);
      if (caller != 0) std::feraiseexcept(caller);
      const StatsResult a = compute_stats(TensorView(dl_view(f32.data(), ScalarType::F32, n32)));
      const StatsResult b = compute_stats(TensorView(dl_view(bf16.data(), ScalarType::BF16, n16)));
      const int flags = std::fetestexcept(FE_ALL_EXCEPT);
      std::feclearexcept(FE_ALL_EXCEPT);
      ASSERT_TRUE(a.stats && b.stats);
      EXPECT_EQ(flags, caller);
    }
  });
}

#if defined(__x86_64__)
// The caller's floating-point mode does not change the statistics: with MXCSR's flush-to-zero
// and denormals-are-zero set (as -ffast-math's startup code, or torch.set_flush_denormal(True),
// leave them for the whole process), subnormal values still count at their value: e4m3's
// smallest (2^-9 and up), f16's, and f32 denormals. The caller's mode is left as it was.
TEST(Stats, FlushToZeroModeOfTheCallerChangesNothing) {
  // e4m3 0x01 = 2^-9, 0x07 = 7 * 2^-9 (subnormal), 0x08 = 2^-6 (the smallest normal); f16 0x0001 = 2^-24.
  std::vector<std::uint8_t> e4m3(64, 0x01);
  e4m3[5] = 0x07;
  e4m3[6] = 0x08;
  std::vector<std::uint16_t> f16(64, 0x0001);
  std::vector<float> f32(64, 1e-40f);
  const double e4m3_sum = 62 * 0x1p-9 + 7 * 0x1p-9 + 0x1p-6;
  const double denormal = static_cast<double>(1e-40f);
  std::vector<std::int64_t> shape{64}, two{2}, half{32};
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040);  // FTZ (bit 15) and DAZ (bit 6)
  with_each_kernel_build([&] {
    for (bool strided : {false, true}) {
      SCOPED_TRACE(strided ? "every other element" : "contiguous");
      const DLTensor t8 = strided ? dl_view(e4m3.data(), ScalarType::F8E4M3, half, &two)
                                  : dl_view(e4m3.data(), ScalarType::F8E4M3, shape);
      const Stats a = host_stats(t8);
      EXPECT_EQ(a.min, 0x1p-9);
      if (!strided) {
        EXPECT_EQ(a.max, 0x1p-6);
        EXPECT_EQ(a.mean, e4m3_sum / 64);
      }
      const Stats b = host_stats(strided ? dl_view(f16.data(), ScalarType::F16, half, &two)
                                         : dl_view(f16.data(), ScalarType::F16, shape));
      EXPECT_EQ(b.min, 0x1p-24);
      EXPECT_EQ(b.mean, 0x1p-24);
      const Stats c = host_stats(strided ? dl_view(f32.data(), ScalarType::F32, half, &two)
                                         : dl_view(f32.data(), ScalarType::F32, shape));
      EXPECT_EQ(c.min, denormal);
      EXPECT_EQ(c.max, denormal);
      EXPECT_DOUBLE_EQ(c.mean, denormal);
    }
  });
  const unsigned after = _mm_getcsr();
  _mm_setcsr(saved);
  EXPECT_EQ(after & 0x8040u, 0x8040u) << "the caller's mode was not left as it was";
}

// Nor does its rounding mode: rounding up, the sums (and so the mean) would come out otherwise
// in the last bits. Values whose f32 lane sums round: 1 + 2^-23 k.
TEST(Stats, TheCallersRoundingModeChangesNothing) {
  std::vector<float> v(4096);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.0f + std::ldexp(static_cast<float>(i % 7), -23) + static_cast<float>(i % 3);
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(v.size())};
  const Stats nearest = host_stats(dl_view(v.data(), ScalarType::F32, shape));
  const unsigned saved = _mm_getcsr();
  _mm_setcsr((saved & ~0x6000u) | 0x4000u);  // round up
  const Stats up = host_stats(dl_view(v.data(), ScalarType::F32, shape));
  const unsigned after = _mm_getcsr();
  _mm_setcsr(saved);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(up.mean), std::bit_cast<std::uint64_t>(nearest.mean)) << up.mean << " vs " << nearest.mean;
  EXPECT_EQ(after & 0x6000u, 0x4000u) << "the caller's rounding mode was not left as it was";
}
#endif

}  // namespace
