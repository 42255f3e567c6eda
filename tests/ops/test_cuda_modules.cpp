// The CUDA versions of the reference kernels compile with nvcc through the JIT (no GPU needed:
// MATE_CUDA_ARCH_LIST=9.0), export their launchers, and CUDA tensors resolve them under
// MATE_DRY_RUN=1 without launching. tests/gpu runs them on a GPU against the host kernels.
#include <optional>
#include <ostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mate/jit/module_status.hpp"
#include "mate/ops/modules.hpp"
#include "mate/ops/ops.hpp"
#include "ops_test_support.hpp"

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;
using mate::tensor::ScalarType;
using namespace mate::ops;
using namespace mate::jit;
using ::testing::HasSubstr;


struct CudaCase {
  Kernel kernel;
  InputType type;
};

void PrintTo(const CudaCase& c, std::ostream* os) { *os << to_string(c.kernel) << " " << to_string(c.type); }

class CudaModule : public ::testing::TestWithParam<CudaCase> {
 protected:
  ScopedOverride archs{Var::MATE_CUDA_ARCH_LIST, "9.0"};
};

TEST_P(CudaModule, CompilesWithNvccForArch90AndExportsItsLauncher) {
  auto [kernel, type] = GetParam();
  ModuleSpec spec = module_spec(kernel, type, Toolchain::Cuda);
  ModuleStatus status = module_status(spec);
  if (status.state == ModuleState::NotBuildable) GTEST_SKIP() << "nvcc not available: " << status.detail;
  std::optional<Module> module;
  try {
    module = load_module(spec);
  } catch (const ModuleError& e) {
    // The build is what this test checks; some systems cannot dlopen CUDA code without a driver.
    if (e.kind() != ModuleError::Kind::LoadFailed) throw;
    GTEST_SKIP() << e.what();
  }
  EXPECT_THAT(module->path(), HasSubstr("/cuda_9.0/cached_ops/" + spec.name + "/"));
  EXPECT_NE(module->symbol("mate_ops_" + std::string(to_string(kernel))), nullptr);
  EXPECT_NE(module->symbol("mate_ops_cuda_error_string"), nullptr);
  if (kernel == Kernel::GroupedGemmNt) {
    EXPECT_NE(module->symbol("mate_ops_copy_to_host"), nullptr);
  }
}

INSTANTIATE_TEST_SUITE_P(AllKernels, CudaModule,
                         ::testing::Values(CudaCase{Kernel::GemmNt, InputType::F32},
                                           CudaCase{Kernel::GemmNt, InputType::BF16},
                                           CudaCase{Kernel::RmsNorm, InputType::F32},
                                           CudaCase{Kernel::RmsNorm, InputType::BF16},
                                           CudaCase{Kernel::GroupedGemmNt, InputType::F32},
                                           CudaCase{Kernel::GroupedGemmNt, InputType::BF16}),
                         [](const auto& info) {
                           return std::string(to_string(info.param.kernel)) + "_" +
                                  std::string(to_string(info.param.type));
                         });

TEST(CudaTensors, DryRunResolvesTheCudaModuleWithoutLaunching) {
  ScopedOverride archs(Var::MATE_CUDA_ARCH_LIST, "9.0");
  ScopedOverride dry(Var::MATE_DRY_RUN, "1");
  mate::ops::testing::PrivateWorkspace workspace;
  ModuleSpec spec = module_spec(Kernel::GemmNt, InputType::F32, Toolchain::Cuda);
  ModuleState before = module_status(spec).state;
  if (before == ModuleState::NotBuildable) GTEST_SKIP() << "nvcc not available";
  ASSERT_EQ(before, ModuleState::Missing) << "a fresh workspace";
  // Device pointers that were never allocated: a launch would fail, a dry run must not launch.
  std::int64_t sa[2] = {4, 8}, sb[2] = {3, 8}, so[2] = {4, 3};
  DLTensor a{reinterpret_cast<void*>(0x10000), {kDLCUDA, 0}, 2, mate::tensor::dl_dtype(ScalarType::F32), sa, nullptr, 0};
  DLTensor b{reinterpret_cast<void*>(0x20000), {kDLCUDA, 0}, 2, mate::tensor::dl_dtype(ScalarType::F32), sb, nullptr, 0};
  DLTensor out{reinterpret_cast<void*>(0x30000), {kDLCUDA, 0}, 2, mate::tensor::dl_dtype(ScalarType::F32), so, nullptr, 0};
  try {
    gemm_nt(&a, &b, &out);
  } catch (const ModuleError& e) {
    if (e.kind() != ModuleError::Kind::LoadFailed) throw;
    GTEST_SKIP() << e.what();
  }
  EXPECT_EQ(module_status(spec).state, ModuleState::JitCached) << "the dry run built the module";
}

}  // namespace
