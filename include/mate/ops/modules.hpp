// mate/ops/modules.hpp — the compiled modules of MATE's reference kernel library: one module per
// kernel, input type and toolchain, rendered from the templates in src/ops/kernels/.
//
// Contract:
//  * module_specs() lists every module the library may load (host and CUDA), for
//    `mate module-status` and `mate aot-build`; register_modules() registers that list with
//    mate::jit::register_module_provider under the library name "mate.ops" (idempotent; the
//    API functions call it too, and the mate program calls it at start-up).
//  * Module names: mate_ops_<kernel>_<f32|bf16>[_cuda], e.g. mate_ops_gemm_nt_bf16_cuda.
//  * Host modules export the kernel as `mate_ops_<kernel>` plus `mate_ops_<kernel>_tile()`;
//    CUDA modules export a synchronous launcher returning a cudaError_t and
//    `mate_ops_cuda_error_string`. The signatures are in docs/ops.md.
#pragma once

#include <string_view>
#include <vector>

#include "mate/jit/module.hpp"

namespace mate::ops {

enum class Kernel { GemmNt, RmsNorm, GroupedGemmNt };
enum class InputType { F32, BF16 };

std::string_view to_string(Kernel k);     // "gemm_nt", "rmsnorm", "grouped_gemm_nt"
std::string_view to_string(InputType t);  // "f32", "bf16"

// The spec of one module. Toolchain Host or Cuda (there are no MUSA kernels: ArgumentError).
// tile 0 is default_tile(); another tile renders a different module (name suffix _t<tile>)
// with the same results, which tests use to check that tiles do not change them.
jit::ModuleSpec module_spec(Kernel kernel, InputType type, jit::Toolchain toolchain, int tile = 0);
// The tile of a kernel in a toolchain: output tile (GEMM), rows per step (host RMSNorm, grouped
// GEMM) or threads per row (CUDA RMSNorm).
int default_tile(Kernel kernel, jit::Toolchain toolchain);

std::vector<jit::ModuleSpec> module_specs();
void register_modules();

}  // namespace mate::ops
