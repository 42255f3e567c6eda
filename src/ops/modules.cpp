// The module specs of the reference kernels and their registration with the module catalog.
#include "mate/ops/modules.hpp"

#include <fmt/format.h>

#include "mate/jit/catalog.hpp"
#include "mate/ops/ops.hpp"

namespace mate::ops {

// Embedded at build time from src/ops/kernels/ (cmake/MateEmbedText.cmake).
namespace kernels {
extern const char kOpsCommonH[];
extern const char kOpsCommonCuh[];
extern const char kGemmNtCpp[];
extern const char kRmsNormCpp[];
extern const char kGroupedGemmNtCpp[];
extern const char kGemmNtCu[];
extern const char kRmsNormCu[];
extern const char kGroupedGemmNtCu[];
}  // namespace kernels

std::string_view to_string(Kernel k) {
  switch (k) {
    case Kernel::GemmNt: return "gemm_nt";
    case Kernel::RmsNorm: return "rmsnorm";
    case Kernel::GroupedGemmNt: return "grouped_gemm_nt";
  }
  return "unknown";
}

std::string_view to_string(InputType t) { return t == InputType::F32 ? "f32" : "bf16"; }

int default_tile(Kernel kernel, jit::Toolchain toolchain) {
  if (toolchain == jit::Toolchain::Host) {
    switch (kernel) {
      case Kernel::GemmNt: return 32;         // 32x32 outputs: a and b tiles stay in L1/L2
      case Kernel::RmsNorm: return 16;        // rows per step
      case Kernel::GroupedGemmNt: return 48;  // rows per step; not a divisor of the alignment on purpose,
                                              // so steps straddle group boundaries
    }
  }
  return kernel == Kernel::RmsNorm ? 256 : 16;  // CUDA: threads per row; 16x16 output blocks
}

jit::ModuleSpec module_spec(Kernel kernel, InputType type, jit::Toolchain toolchain, int tile) {
  if (toolchain == jit::Toolchain::Musa)
    throw ArgumentError("mate::ops::module_spec: the reference kernels have no MUSA version (accepted: host, cuda)");
  if (tile < 0) throw ArgumentError(fmt::format("mate::ops::module_spec: tile {} is negative (0 = the default)", tile));
  bool cuda = toolchain == jit::Toolchain::Cuda;
  if (cuda && kernel == Kernel::RmsNorm && tile != 0 && ((tile & (tile - 1)) != 0 || tile > 1024))
    throw ArgumentError(fmt::format("mate::ops::module_spec: CUDA RMSNorm tile {} is not a power of two up to 1024", tile));
  if (cuda && kernel != Kernel::RmsNorm && tile > 32)
    throw ArgumentError(fmt::format("mate::ops::module_spec: CUDA GEMM tile {} exceeds 32 (tile x tile threads per block)", tile));
  int chosen = tile == 0 ? default_tile(kernel, toolchain) : tile;

  const char* text = nullptr;
  switch (kernel) {
    case Kernel::GemmNt: text = cuda ? kernels::kGemmNtCu : kernels::kGemmNtCpp; break;
    case Kernel::RmsNorm: text = cuda ? kernels::kRmsNormCu : kernels::kRmsNormCpp; break;
    case Kernel::GroupedGemmNt: text = cuda ? kernels::kGroupedGemmNtCu : kernels::kGroupedGemmNtCpp; break;
  }
  std::string name = fmt::format("mate_ops_{}_{}", to_string(kernel), to_string(type));
  if (tile != 0) name += fmt::format("_t{}", tile);
  if (cuda) name += "_cuda";
  std::string filename = fmt::format("{}.{}", to_string(kernel), cuda ? "cu" : "cpp");
  return jit::ModuleSpec{
      .name = name,
      .toolchain = toolchain,
      .sources = {{filename, text},
                  cuda ? jit::SourceTemplate{"ops_common.cuh", kernels::kOpsCommonCuh}
                       : jit::SourceTemplate{"ops_common.h", kernels::kOpsCommonH}},
      .params = {{"in_type", type == InputType::F32 ? "float" : "bf16_t"}, {"tile", std::to_string(chosen)}},
  };
}

std::vector<jit::ModuleSpec> module_specs() {
  std::vector<jit::ModuleSpec> out;
  for (auto toolchain : {jit::Toolchain::Host, jit::Toolchain::Cuda})
    for (auto kernel : {Kernel::GemmNt, Kernel::RmsNorm, Kernel::GroupedGemmNt})
      for (auto type : {InputType::F32, InputType::BF16}) out.push_back(module_spec(kernel, type, toolchain));
  return out;
}

void register_modules() { jit::register_module_provider("mate.ops", &module_specs); }

}  // namespace mate::ops
