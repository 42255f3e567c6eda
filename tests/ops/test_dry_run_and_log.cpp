// MATE_DRY_RUN=1 (validate and resolve modules, no launch) and the level-3 log of ops calls.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mate/jit/module_status.hpp"
#include "mate/log/api.hpp"
#include "mate/ops/contiguous_layout.hpp"
#include "mate/ops/modules.hpp"
#include "mate/ops/ops.hpp"
#include "ops_test_support.hpp"
#include "temp_dir.hpp"

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;
using mate::tensor::ScalarType;
using namespace mate::ops;
using namespace mate::ops::testing;
using ::testing::HasSubstr;


mate::jit::ModuleState state_of(Kernel kernel, InputType type) {
  return mate::jit::module_status(module_spec(kernel, type, mate::jit::Toolchain::Host)).state;
}

TEST(DryRun, ValidatesAndResolvesModulesButLeavesOutputsUntouched) {
  // A workspace of its own: the modules are missing before the dry run and built by it.
  PrivateWorkspace workspace;
  ScopedOverride dry(Var::MATE_DRY_RUN, "1");
  ASSERT_EQ(state_of(Kernel::GemmNt, InputType::BF16), mate::jit::ModuleState::Missing);
  ASSERT_EQ(state_of(Kernel::RmsNorm, InputType::F32), mate::jit::ModuleState::Missing);
  ASSERT_EQ(state_of(Kernel::GroupedGemmNt, InputType::F32), mate::jit::ModuleState::Missing);
  std::mt19937 rng(1);
  HostTensor a({5, 3}, ScalarType::BF16), b({2, 3}, ScalarType::BF16), out({5, 2}, ScalarType::F32);
  a.fill_random(rng);
  b.fill_random(rng);
  for (std::int64_t i = 0; i < out.numel(); ++i) out.set(i, 42.0f);
  gemm_nt(a.cdl(), b.cdl(), out.dl());
  for (float v : out.values()) EXPECT_EQ(v, 42.0f) << "a dry run must not launch the kernel";
  EXPECT_EQ(state_of(Kernel::GemmNt, InputType::BF16), mate::jit::ModuleState::JitCached)
      << "a dry run still builds the module";

  HostTensor x({3, 8}, ScalarType::F32), w({8}, ScalarType::F32), y({3, 8}, ScalarType::F32);
  x.fill_random(rng);
  w.fill_random(rng);
  for (std::int64_t i = 0; i < y.numel(); ++i) y.set(i, 7.0f);
  rmsnorm(x.cdl(), w.cdl(), y.dl());
  for (float v : y.values()) EXPECT_EQ(v, 7.0f);
  EXPECT_EQ(state_of(Kernel::RmsNorm, InputType::F32), mate::jit::ModuleState::JitCached);

  auto layout = make_contiguous_layout(std::vector<std::int64_t>{3}, get_mk_alignment_for_contiguous_layout());
  HostTensor lhs({layout.m_sum, 2}, ScalarType::F32), rhs({1, 4, 2}, ScalarType::F32),
      gout({layout.m_sum, 4}, ScalarType::F32), idx({layout.m_sum}, ScalarType::I32);
  for (std::int64_t r = 0; r < layout.m_sum; ++r) idx.set_i32(r, layout.m_indices[r]);
  for (std::int64_t i = 0; i < gout.numel(); ++i) gout.set(i, 9.0f);
  m_grouped_gemm_nt_contiguous(lhs.cdl(), rhs.cdl(), gout.dl(), idx.cdl());
  for (float v : gout.values()) EXPECT_EQ(v, 9.0f);
  EXPECT_EQ(state_of(Kernel::GroupedGemmNt, InputType::F32), mate::jit::ModuleState::JitCached);

  // Arguments are still checked.
  idx.set_i32(0, 5);
  EXPECT_THROW(m_grouped_gemm_nt_contiguous(lhs.cdl(), rhs.cdl(), gout.dl(), idx.cdl()), ArgumentError);
  HostTensor bad({5, 4}, ScalarType::BF16);
  EXPECT_THROW(gemm_nt(a.cdl(), bad.cdl(), out.dl()), ArgumentError);
}

TEST(DryRun, OffByDefaultTheKernelRuns) {
  ScopedOverride dry(Var::MATE_DRY_RUN, std::nullopt);
  HostTensor a({1, 1}, ScalarType::F32), b({1, 1}, ScalarType::F32), out({1, 1}, ScalarType::F32);
  a.set(0, 3.0f);
  b.set(0, 4.0f);
  out.set(0, 42.0f);
  gemm_nt(a.cdl(), b.cdl(), out.dl());
  EXPECT_EQ(out.get(0), 12.0f);
}

struct Level3Log : ::testing::Test {
  mate::testing::TempDir dir{"mate_ops_log"};
  std::string path = (dir / "ops.log").string();
  std::unique_ptr<ScopedOverride> level, dest, format;
  void SetUp() override {
    level = std::make_unique<ScopedOverride>(Var::MATE_LOGLEVEL, "3");
    dest = std::make_unique<ScopedOverride>(Var::MATE_LOGDEST, path);
    format = std::make_unique<ScopedOverride>(Var::MATE_LOGFORMAT, "text");
    mate::log::reconfigure();
  }
  void TearDown() override {
    level.reset();
    dest.reset();
    format.reset();
    mate::log::reconfigure();
  }
};

TEST_F(Level3Log, ShowsInputsOutputsAndErrorsOfOpsCalls) {
  HostTensor a({4, 8}, ScalarType::F32), b({3, 8}, ScalarType::F32), out({4, 3}, ScalarType::F32);
  gemm_nt(a.cdl(), b.cdl(), out.dl(), 0.5f, 0.0f);
  HostTensor x({2, 16}, ScalarType::BF16), w({16}, ScalarType::BF16), y({2, 16}, ScalarType::BF16);
  rmsnorm(x.cdl(), w.cdl(), y.dl(), 1e-5f);
  HostTensor b5({3, 5}, ScalarType::F32);
  EXPECT_THROW(gemm_nt(a.cdl(), b5.cdl(), out.dl()), ArgumentError);

  std::string log = mate::testing::read_file(path);
  EXPECT_THAT(log, HasSubstr("] ops.gemm_nt inputs\n  a: tensor f32 [4, 8] strides [8, 1] cpu contiguous va ["));
  EXPECT_THAT(log, HasSubstr("  b: tensor f32 [3, 8] strides [8, 1] cpu contiguous"));
  EXPECT_THAT(log, HasSubstr("  alpha: f32 0.5\n  beta: f32 0\n"));
  EXPECT_THAT(log, HasSubstr("] ops.gemm_nt outputs ("));
  EXPECT_THAT(log, HasSubstr("  out: tensor f32 [4, 3] strides [3, 1] cpu contiguous"));
  EXPECT_THAT(log, HasSubstr("] ops.rmsnorm inputs\n  input: tensor bf16 [2, 16]"));
  EXPECT_THAT(log, HasSubstr("  eps: f32 1e-05"));
  EXPECT_THAT(log, HasSubstr("] ops.rmsnorm outputs ("));
  EXPECT_THAT(log, HasSubstr("ops.gemm_nt exception ("));
  EXPECT_THAT(log, HasSubstr("mate::ops::ArgumentError: mate::ops::gemm_nt: argument 'b': has shape [3, 5]"));
}

}  // namespace
