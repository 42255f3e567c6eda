// rmsnorm: argument checks, kernel resolution and the launch on the host or a CUDA device.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "mate/log/api.hpp"
#include "mate/ops/ops.hpp"
#include "ops/check.hpp"
#include "ops/kernel_table.hpp"

namespace mate::ops {

void rmsnorm(const DLTensor* input, const DLTensor* weight, DLTensor* out, float eps) {
  MATE_API("ops.rmsnorm", input, weight, out, eps).outputs(MATE_ARGS(out)).run([&] {
    using tensor::ScalarType;
    detail::Checker check("rmsnorm");
    const DLTensor& tin = check.tensor("input", input, 2);
    const DLTensor& tw = check.tensor("weight", weight, 1);
    const DLTensor& tout = check.tensor("out", out, 2);
    check.dtype("input", tin, {ScalarType::F32, ScalarType::BF16});
    check.same_dtype("weight", tw, "input", tin);
    check.same_dtype("out", tout, "input", tin);
    std::int64_t rows = tin.shape[0], hidden = tin.shape[1];
    if (hidden < 1)
      check.fail("input", fmt::format("has hidden size 0, shape [{}, 0] (accepted: hidden >= 1; the mean over no "
                                      "elements is undefined)",
                                      rows));
    check.dim("weight", tw, 0, hidden, "hidden, the columns of 'input'");
    check.dim("out", tout, 0, rows, "the rows of 'input'");
    check.dim("out", tout, 1, hidden, "hidden, the columns of 'input'");
    if (!std::isfinite(eps) || eps < 0.0f)
      check.fail("eps", fmt::format("is {} (accepted: a finite value >= 0)", eps));
    check.no_overlap("out", tout, "weight", tw);
    // out == input (in place) is allowed: each row is read whole before it is written. A
    // partial overlap is not.
    bool in_place = tout.data == tin.data && tout.byte_offset == tin.byte_offset;
    if (!in_place) check.no_overlap("out", tout, "input", tin);
    auto placement = check.placement();

    InputType type = detail::Checker::input_type(tin);
    auto toolchain = detail::toolchain_for(placement);
    void* fn = detail::kernel_symbol("rmsnorm", Kernel::RmsNorm, type, toolchain, "mate_ops_rmsnorm");
    if (detail::dry_run()) return;
    auto* pin = detail::first_element<const void>(tin);
    auto* pw = detail::first_element<const void>(tw);
    auto* pout = detail::first_element<void>(tout);
    if (toolchain == jit::Toolchain::Host) {
      using HostFn = void(long, long, const void*, const void*, void*, float);
      reinterpret_cast<HostFn*>(fn)(rows, hidden, pin, pw, pout, eps);
    } else {
      using CudaFn = int(int, long, long, const void*, const void*, void*, float);
      int error = reinterpret_cast<CudaFn*>(fn)(placement.device.device_id, rows, hidden, pin, pw, pout, eps);
      detail::check_cuda("rmsnorm", Kernel::RmsNorm, type, placement, error);
    }
  });
}

}  // namespace mate::ops
