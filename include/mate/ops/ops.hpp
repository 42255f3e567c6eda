// mate/ops/ops.hpp — MATE's reference kernel library: GEMM, RMSNorm and a DeepGEMM-compatible
// contiguous grouped GEMM, built through MATE's JIT/AOT module system and instrumented with API
// logging. It is the kernel library MATE's own demo, tests and benchmarks run on, and a worked
// example for kernel authors (docs/ops.md).
//
// Contract:
//  * Arguments are plain types (const DLTensor* inputs, DLTensor* outputs, scalars), so each
//    function can be registered for replay as it is. Every call is logged with MATE_API, outputs
//    included.
//  * Tensors must be row-major contiguous (DLPack strides NULL or compact), aligned to their
//    element size, all on one device, and the output must not overlap an input. Anything else
//    throws ArgumentError naming the function, the argument, what was wrong and what is accepted.
//  * Host tensors (kDLCPU, kDLCUDAHost) run the host kernels; CUDA tensors run the CUDA kernels
//    (JIT-built with nvcc for the arch list in effect, or AOT), synchronously on the legacy
//    default stream. Other devices are an ArgumentError. A module that cannot be built or
//    loaded is a mate::jit::ModuleError; a failed CUDA launch is a KernelError.
//  * MATE_DRY_RUN=1 (internal): calls validate, resolve and build their modules and log, but do
//    not launch kernels; outputs are left untouched.
//  * Thread-safe; kernels are resolved once per process and then called directly.
#pragma once

#include <dlpack/dlpack.h>

#include <stdexcept>
#include <string>

namespace mate::ops {

// An argument the function does not accept. what() names the function and the argument.
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A device kernel launch or the copy of its arguments failed (the CUDA error text is included).
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// out[m, n] = alpha * a[m, k] . b[n, k]^T + beta * out   (NT layout, as DeepGEMM's gemm_nt)
// a, b: f32 or bf16 (the same); out: f32. Products are accumulated in f32. beta == 0 does not
// read out (it may hold anything, NaN included).
void gemm_nt(const DLTensor* a, const DLTensor* b, DLTensor* out, float alpha = 1.0f, float beta = 0.0f);

// out[r, :] = input[r, :] / sqrt(mean(input[r, :]^2) + eps) * weight
// input, out: [rows, hidden]; weight: [hidden]; all f32 or all bf16. Arithmetic in f32; bf16
// results are rounded to nearest even. hidden >= 1, eps finite and >= 0.
void rmsnorm(const DLTensor* input, const DLTensor* weight, DLTensor* out, float eps = 1e-6f);

// DeepGEMM-compatible contiguous grouped GEMM (m_grouped_*_gemm_nt_contiguous):
//   out[r, :] = lhs[r, :] . rhs[m_indices[r], :, :]^T,  and out[r, :] = 0 where m_indices[r] == -1
// lhs: [m_sum, k]; rhs: [groups, n, k] (f32 or bf16, the same); m_indices: [m_sum] int32;
// out: [m_sum, n] f32. m_sum must be a multiple of get_mk_alignment_for_contiguous_layout(),
// every aligned block of rows must belong to one group (padding rows -1 may follow a group's
// rows), and indices must lie in [-1, groups). make_contiguous_layout() builds such a layout.
void m_grouped_gemm_nt_contiguous(const DLTensor* lhs, const DLTensor* rhs, DLTensor* out,
                                  const DLTensor* m_indices);

}  // namespace mate::ops
