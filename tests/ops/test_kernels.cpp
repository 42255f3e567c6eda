// Each reference kernel through its public API against a naive double-precision reference, on
// random and edge-case shapes, for f32 and bf16 inputs.
#include <atomic>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <thread>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mate/jit/module.hpp"
#include "mate/ops/contiguous_layout.hpp"
#include "mate/ops/modules.hpp"
#include "mate/ops/ops.hpp"
#include "ops_test_support.hpp"

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;
using mate::tensor::ScalarType;
using namespace mate::ops;
using namespace mate::ops::testing;


// ---- gemm_nt ----

struct GemmCase {
  ScalarType type;
  std::int64_t m, n, k;
};

void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << (c.type == ScalarType::F32 ? "f32" : "bf16") << " m=" << c.m << " n=" << c.n << " k=" << c.k;
}

class GemmNt : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmNt, MatchesTheNaiveReference) {
  auto [type, m, n, k] = GetParam();
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 17 + k));
  HostTensor a({m, k}, type), b({n, k}, type), out({m, n}, ScalarType::F32);
  auto av = a.fill_random(rng);
  auto bv = b.fill_random(rng);
  for (std::int64_t i = 0; i < out.numel(); ++i) out.set(i, std::numeric_limits<float>::quiet_NaN());
  gemm_nt(a.cdl(), b.cdl(), out.dl());
  auto ref = reference_gemm_nt(av, bv, m, n, k);
  auto got = out.values();
  for (std::int64_t i = 0; i < m * n; ++i)
    ASSERT_NEAR(got[i], ref[i], dot_tolerance(k)) << "element " << i << " (row " << i / n << ", col " << i % n << ")";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmNt,
    ::testing::Values(GemmCase{ScalarType::F32, 1, 1, 1}, GemmCase{ScalarType::F32, 37, 45, 1},
                      GemmCase{ScalarType::F32, 64, 64, 64}, GemmCase{ScalarType::F32, 33, 70, 129},
                      GemmCase{ScalarType::F32, 0, 5, 3}, GemmCase{ScalarType::F32, 5, 0, 3},
                      GemmCase{ScalarType::F32, 4, 6, 0}, GemmCase{ScalarType::BF16, 1, 1, 1},
                      GemmCase{ScalarType::BF16, 37, 45, 1}, GemmCase{ScalarType::BF16, 33, 70, 129},
                      GemmCase{ScalarType::BF16, 65, 31, 256}),
    [](const auto& info) {
      const GemmCase& c = info.param;
      return std::string(c.type == ScalarType::F32 ? "f32" : "bf16") + "_m" + std::to_string(c.m) + "_n" +
             std::to_string(c.n) + "_k" + std::to_string(c.k);
    });

TEST(GemmNtScalars, AlphaAndBetaScaleTheProductAndTheOldOutput) {
  std::mt19937 rng(7);
  HostTensor a({9, 5}, ScalarType::F32), b({11, 5}, ScalarType::F32), out({9, 11}, ScalarType::F32);
  auto av = a.fill_random(rng);
  auto bv = b.fill_random(rng);
  auto old = out.fill_random(rng);
  gemm_nt(a.cdl(), b.cdl(), out.dl(), 0.5f, -2.0f);
  auto ref = reference_gemm_nt(av, bv, 9, 11, 5);
  auto got = out.values();
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], 0.5 * ref[i] - 2.0 * old[i], 1e-5) << i;
}

TEST(GemmNtScalars, Bf16InputsAreWidenedExactly) {
  // k = 1: each output is one product of two bf16 values, exact in f32 (8-bit significands).
  HostTensor a({3, 1}, ScalarType::BF16), b({2, 1}, ScalarType::BF16), out({3, 2}, ScalarType::F32);
  float av[3] = {a.set(0, 1.00390625f), a.set(1, -3.1415926f), a.set(2, 1e-20f)};
  float bv[2] = {b.set(0, 255.0f), b.set(1, -0.0078125f)};
  EXPECT_EQ(av[0], 1.0f) << "1 + 2^-8 is a tie between bf16 1 and 1 + 2^-7: ties go to even";
  gemm_nt(a.cdl(), b.cdl(), out.dl());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) EXPECT_EQ(out.get(i * 2 + j), av[i] * bv[j]) << i << "," << j;
}

TEST(GemmNtScalars, TheTileDoesNotChangeTheResult) {
  // A module rendered with tile 7 (a separate module) gives the same bits as the default tile.
  std::mt19937 rng(11);
  std::int64_t m = 23, n = 19, k = 40;
  HostTensor a({m, k}, ScalarType::F32), b({n, k}, ScalarType::F32), out({m, n}, ScalarType::F32);
  a.fill_random(rng);
  b.fill_random(rng);
  gemm_nt(a.cdl(), b.cdl(), out.dl());
  auto spec = module_spec(Kernel::GemmNt, InputType::F32, mate::jit::Toolchain::Host, 7);
  auto module = mate::jit::load_module(spec);
  EXPECT_EQ(module.function<long()>("mate_ops_gemm_nt_tile")(), 7);
  std::vector<float> other(static_cast<std::size_t>(m * n));
  using Fn = void(long, long, long, const void*, const void*, float*, float, float);
  module.function<Fn>("mate_ops_gemm_nt")(m, n, k, a.cdl()->data, b.cdl()->data, other.data(), 1.0f, 0.0f);
  EXPECT_EQ(other, out.values());
}

// ---- rmsnorm ----

std::vector<double> reference_rmsnorm(const std::vector<float>& x, const std::vector<float>& w, std::int64_t rows,
                                      std::int64_t hidden, double eps) {
  std::vector<double> out(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t i = 0; i < hidden; ++i) ss += double(x[r * hidden + i]) * x[r * hidden + i];
    double inv = 1.0 / std::sqrt(ss / double(hidden) + eps);
    for (std::int64_t i = 0; i < hidden; ++i) out[r * hidden + i] = x[r * hidden + i] * inv * w[i];
  }
  return out;
}

struct NormCase {
  ScalarType type;
  std::int64_t rows, hidden;
};
void PrintTo(const NormCase& c, std::ostream* os) {
  *os << (c.type == ScalarType::F32 ? "f32" : "bf16") << " rows=" << c.rows << " hidden=" << c.hidden;
}
// f32: a few ulps of the result; bf16: the output is rounded to 8 significant bits.
double norm_tolerance(ScalarType type, double ref) {
  return type == ScalarType::F32 ? 1e-5 * (1 + std::abs(ref)) : std::abs(ref) / 128 + 1e-6;
}
class RmsNorm : public ::testing::TestWithParam<NormCase> {};

TEST_P(RmsNorm, MatchesTheNaiveReference) {
  auto [type, rows, hidden] = GetParam();
  std::mt19937 rng(static_cast<unsigned>(rows * 7 + hidden));
  HostTensor x({rows, hidden}, type), w({hidden}, type), out({rows, hidden}, type);
  auto xv = x.fill_random(rng);
  auto wv = w.fill_random(rng);
  rmsnorm(x.cdl(), w.cdl(), out.dl(), 1e-5f);
  auto ref = reference_rmsnorm(xv, wv, rows, hidden, 1e-5);
  auto got = out.values();
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], ref[i], norm_tolerance(type, ref[i])) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNorm,
                         ::testing::Values(NormCase{ScalarType::F32, 1, 1}, NormCase{ScalarType::F32, 37, 100},
                                           NormCase{ScalarType::F32, 3, 4096}, NormCase{ScalarType::F32, 0, 8},
                                           NormCase{ScalarType::BF16, 1, 1}, NormCase{ScalarType::BF16, 17, 333},
                                           NormCase{ScalarType::BF16, 2, 4096}),
                         [](const auto& info) {
                           const NormCase& c = info.param;
                           return std::string(c.type == ScalarType::F32 ? "f32" : "bf16") + "_rows" +
                                  std::to_string(c.rows) + "_hidden" + std::to_string(c.hidden);
                         });

// Moves `t`'s first element 8 bytes into its buffer, leaving values in the bytes before it that
// would change the result if a kernel read or wrote at `data` itself.
void start_at_byte_offset(HostTensor& t, std::mt19937& rng) {
  t.fill_random(rng);
  t.raw().byte_offset = 8;
}

TEST(ByteOffset, GemmNtAndRmsNormReadAndWriteFromDataPlusByteOffset) {
  std::mt19937 rng(11);
  HostTensor a({3, 4}, ScalarType::F32), b({5, 4}, ScalarType::F32), out({3, 5}, ScalarType::F32);
  for (HostTensor* t : {&a, &b, &out}) start_at_byte_offset(*t, rng);
  auto av = a.fill_random(rng);
  auto bv = b.fill_random(rng);
  gemm_nt(a.cdl(), b.cdl(), out.dl());
  auto ref = reference_gemm_nt(av, bv, 3, 5, 4);
  auto got = out.values();
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], dot_tolerance(4)) << "element " << i;

  HostTensor x({2, 6}, ScalarType::BF16), w({6}, ScalarType::BF16), y({2, 6}, ScalarType::BF16);
  for (HostTensor* t : {&x, &w, &y}) start_at_byte_offset(*t, rng);
  auto xv = x.fill_random(rng);
  auto wv = w.fill_random(rng);
  rmsnorm(x.cdl(), w.cdl(), y.dl(), 1e-5f);
  auto nref = reference_rmsnorm(xv, wv, 2, 6, 1e-5);
  auto ngot = y.values();
  for (std::size_t i = 0; i < ngot.size(); ++i) ASSERT_NEAR(ngot[i], nref[i], std::abs(nref[i]) / 128 + 1e-6) << "element " << i;
}

TEST(RmsNormBf16, OutputsAreRoundedToNearestEvenNotTruncated) {
  // The kernel computes in f32 in the same order as this test, so its bf16 outputs must be the
  // round-to-nearest-even of the same f32 values, bit for bit. Truncation would differ in
  // about half of them.
  std::mt19937 rng(3);
  std::int64_t rows = 8, hidden = 64;
  HostTensor x({rows, hidden}, ScalarType::BF16), w({hidden}, ScalarType::BF16), out({rows, hidden}, ScalarType::BF16);
  auto xv = x.fill_random(rng);
  auto wv = w.fill_random(rng);
  rmsnorm(x.cdl(), w.cdl(), out.dl(), 1e-6f);
  int differs_from_truncation = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    float ss = 0.0f;
    for (std::int64_t i = 0; i < hidden; ++i) ss += xv[r * hidden + i] * xv[r * hidden + i];
    float inv = 1.0f / std::sqrt(ss / static_cast<float>(hidden) + 1e-6f);
    for (std::int64_t i = 0; i < hidden; ++i) {
      float f = xv[r * hidden + i] * inv * wv[i];
      std::uint32_t u;
      std::memcpy(&u, &f, 4);
      ASSERT_EQ(out.bits(r * hidden + i), bf16_bits(f)) << "row " << r << " col " << i << " f32 " << f;
      if (bf16_bits(f) != static_cast<std::uint16_t>(u >> 16)) ++differs_from_truncation;
    }
  }
  EXPECT_GT(differs_from_truncation, 0) << "the data must exercise rounding";
}

TEST(RmsNormBf16, InPlaceGivesTheSameResult) {
  std::mt19937 rng(5);
  HostTensor x({6, 50}, ScalarType::F32), w({50}, ScalarType::F32), out({6, 50}, ScalarType::F32);
  x.fill_random(rng);
  w.fill_random(rng);
  rmsnorm(x.cdl(), w.cdl(), out.dl());
  rmsnorm(x.cdl(), w.cdl(), x.dl());
  EXPECT_EQ(x.values(), out.values());
}

// ---- m_grouped_gemm_nt_contiguous ----

void run_grouped_case(ScalarType type, const std::vector<std::int64_t>& group_rows, std::int64_t n, std::int64_t k) {
  auto layout = make_contiguous_layout(group_rows);
  std::int64_t m_sum = layout.m_sum, groups = static_cast<std::int64_t>(group_rows.size());
  std::mt19937 rng(static_cast<unsigned>(m_sum + n * 3 + k));
  HostTensor lhs({m_sum, k}, type), rhs({groups, n, k}, type), out({m_sum, n}, ScalarType::F32),
      idx({m_sum}, ScalarType::I32);
  auto lv = lhs.fill_random(rng);  // padding rows hold data too: the kernel must ignore it
  auto rv = rhs.fill_random(rng);
  for (std::int64_t r = 0; r < m_sum; ++r) idx.set_i32(r, layout.m_indices[r]);
  for (std::int64_t i = 0; i < out.numel(); ++i) out.set(i, std::numeric_limits<float>::quiet_NaN());
  m_grouped_gemm_nt_contiguous(lhs.cdl(), rhs.cdl(), out.dl(), idx.cdl());
  auto got = out.values();
  for (std::int64_t r = 0; r < m_sum; ++r) {
    std::int32_t g = layout.m_indices[r];
    for (std::int64_t j = 0; j < n; ++j) {
      double ref = 0;
      if (g >= 0)
        for (std::int64_t p = 0; p < k; ++p) ref += double(lv[r * k + p]) * rv[(g * n + j) * k + p];
      if (g < 0) ASSERT_EQ(got[r * n + j], 0.0f) << "padding row " << r << " col " << j << " must be zero";
      else ASSERT_NEAR(got[r * n + j], ref, dot_tolerance(k)) << "row " << r << " (group " << g << ") col " << j;
    }
  }
}

TEST(GroupedGemmNt, F32WithEmptyGroupsAndPaddingMatchesTheReference) {
  run_grouped_case(ScalarType::F32, {3, 0, 130, 1, 0}, 45, 33);
}
TEST(GroupedGemmNt, Bf16MatchesTheReference) { run_grouped_case(ScalarType::BF16, {128, 5, 200}, 17, 64); }
TEST(GroupedGemmNt, KOfOne) { run_grouped_case(ScalarType::F32, {1, 127, 129}, 8, 1); }
TEST(GroupedGemmNt, OnlyEmptyGroupsIsAnEmptyCall) { run_grouped_case(ScalarType::F32, {0, 0}, 4, 4); }
TEST(GroupedGemmNt, AlignmentOf256) {
  ScopedOverride align(Var::MATE_DEEPGEMM_MK_ALIGNMENT, "256");
  ASSERT_EQ(get_mk_alignment_for_contiguous_layout(), 256);
  run_grouped_case(ScalarType::F32, {1, 300}, 9, 5);
}

// ---- threads ----

// A kernel library is called from many threads at once. Each test is its own process, so here
// the first calls race: module lookup and load, the variables read once, the kernel table; every
// thread must still get its own right answer. (The tsan preset checks these paths for races.)
TEST(Threads, FirstCallsFromManyThreadsEachGetTheirOwnRightAnswer) {
  constexpr int kThreads = 4;
  std::atomic<int> started{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const ScalarType type = t % 2 == 0 ? ScalarType::F32 : ScalarType::BF16;
      const std::int64_t m = 5 + t, n = 7 + t, k = 33 + t, rows = 3 + t;
      std::mt19937 rng(static_cast<unsigned>(1000 + t));
      HostTensor a({m, k}, type), b({n, k}, type), out({m, n}, ScalarType::F32);
      HostTensor x({rows, k}, type), w({k}, type), y({rows, k}, type);
      const auto av = a.fill_random(rng), bv = b.fill_random(rng), xv = x.fill_random(rng), wv = w.fill_random(rng);
      for (std::int64_t i = 0; i < out.numel(); ++i) out.set(i, std::numeric_limits<float>::quiet_NaN());
      for (std::int64_t i = 0; i < y.numel(); ++i) y.set(i, std::numeric_limits<float>::quiet_NaN());
      started.fetch_add(1);
      while (started.load() < kThreads) std::this_thread::yield();  // the first calls together
      gemm_nt(a.cdl(), b.cdl(), out.dl());
      rmsnorm(x.cdl(), w.cdl(), y.dl(), 1e-5f);
      const auto product = reference_gemm_nt(av, bv, m, n, k);
      const auto got = out.values();
      for (std::int64_t i = 0; i < m * n; ++i)
        if (!(std::abs(got[i] - product[i]) <= dot_tolerance(k))) ++wrong;  // NaN: never written
      const auto norm = reference_rmsnorm(xv, wv, rows, k, 1e-5);
      const auto normed = y.values();
      for (std::size_t i = 0; i < normed.size(); ++i) {
        if (!(std::abs(normed[i] - norm[i]) <= norm_tolerance(type, norm[i]))) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0) << "elements that differ from the reference";
}

}  // namespace
