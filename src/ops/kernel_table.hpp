// Resolving the reference kernels: a module is loaded (AOT, JIT cache or built) the first time a
// call needs it, and its symbols are kept for the process, so later calls cost a map lookup.
#pragma once

#include <string>

#include "mate/jit/module.hpp"
#include "mate/ops/modules.hpp"
#include "ops/check.hpp"

namespace mate::ops::detail {

// The toolchain whose kernels run on `placement` (Host or Cuda).
jit::Toolchain toolchain_for(const Placement& placement);

// The address of `symbol` (a string literal: it is kept as a key) in the module of (kernel, type,
// toolchain). A module that cannot be resolved is a jit::ModuleError whose message starts with
// "mate::ops::<function>: " and, for device tensors, says that they need the device module.
void* kernel_symbol(const char* function, Kernel kernel, InputType type, jit::Toolchain toolchain,
                    const char* symbol);

// Forgets every kept symbol, so that the next call resolves its module again. For tests that
// change the module workspace within one process (MATE_WORKSPACE_BASE is latched otherwise).
void forget_kernel_symbols();

// Throws KernelError when a CUDA launcher returned a non-zero cudaError_t.
void check_cuda(const char* function, Kernel kernel, InputType type, const Placement& placement, int error);

// MATE_DRY_RUN=1: validate and resolve, but do not launch.
bool dry_run();

}  // namespace mate::ops::detail
