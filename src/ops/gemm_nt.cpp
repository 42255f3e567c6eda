// gemm_nt: argument checks, kernel resolution and the launch on the host or a CUDA device.
#include <cstdint>

#include "mate/log/api.hpp"
#include "mate/ops/ops.hpp"
#include "ops/check.hpp"
#include "ops/kernel_table.hpp"

namespace mate::ops {

void gemm_nt(const DLTensor* a, const DLTensor* b, DLTensor* out, float alpha, float beta) {
  MATE_API("ops.gemm_nt", a, b, out, alpha, beta).outputs(MATE_ARGS(out)).run([&] {
    using tensor::ScalarType;
    detail::Checker check("gemm_nt");
    const DLTensor& ta = check.tensor("a", a, 2);
    const DLTensor& tb = check.tensor("b", b, 2);
    const DLTensor& tout = check.tensor("out", out, 2);
    check.dtype("a", ta, {ScalarType::F32, ScalarType::BF16});
    check.same_dtype("b", tb, "a", ta);
    check.dtype("out", tout, {ScalarType::F32});
    std::int64_t m = ta.shape[0], k = ta.shape[1], n = tb.shape[0];
    check.dim("b", tb, 1, k, "k, the columns of 'a': b is [n, k] in the NT layout");
    check.dim("out", tout, 0, m, "m, the rows of 'a'");
    check.dim("out", tout, 1, n, "n, the rows of 'b'");
    check.no_overlap("out", tout, "a", ta);
    check.no_overlap("out", tout, "b", tb);
    auto placement = check.placement();

    InputType type = detail::Checker::input_type(ta);
    auto toolchain = detail::toolchain_for(placement);
    void* fn = detail::kernel_symbol("gemm_nt", Kernel::GemmNt, type, toolchain, "mate_ops_gemm_nt");
    if (detail::dry_run()) return;
    auto* pa = detail::first_element<const void>(ta);
    auto* pb = detail::first_element<const void>(tb);
    auto* pout = detail::first_element<float>(tout);
    if (toolchain == jit::Toolchain::Host) {
      using HostFn = void(long, long, long, const void*, const void*, float*, float, float);
      reinterpret_cast<HostFn*>(fn)(m, n, k, pa, pb, pout, alpha, beta);
    } else {
      using CudaFn = int(int, long, long, long, const void*, const void*, float*, float, float);
      int error = reinterpret_cast<CudaFn*>(fn)(placement.device.device_id, m, n, k, pa, pb, pout, alpha, beta);
      detail::check_cuda("gemm_nt", Kernel::GemmNt, type, placement, error);
    }
  });
}

}  // namespace mate::ops
