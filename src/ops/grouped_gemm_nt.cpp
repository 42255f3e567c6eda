// m_grouped_gemm_nt_contiguous: argument checks (the contiguous layout included), kernel
// resolution and the launch on the host or a CUDA device.
#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "mate/log/api.hpp"
#include "mate/ops/contiguous_layout.hpp"
#include "mate/ops/ops.hpp"
#include "ops/check.hpp"
#include "ops/kernel_table.hpp"

namespace mate::ops {

namespace {

// Indices in [-1, groups), and every aligned block of rows in at most one group: the layout a
// DeepGEMM kernel assumes (it reads one group per M block).
void check_m_indices(const detail::Checker& check, const std::int32_t* idx, std::int64_t m_sum, std::int64_t groups,
                     std::int64_t alignment) {
  for (std::int64_t block = 0; block < m_sum; block += alignment) {
    std::int64_t owner_row = -1;
    for (std::int64_t r = block; r < block + alignment; ++r) {
      std::int32_t g = idx[r];
      if (g < -1 || g >= groups)
        check.fail("m_indices", fmt::format("m_indices[{}] = {} is out of range (accepted: 0..{} for the groups "
                                            "of 'rhs', -1 for padding rows)",
                                            r, g, groups - 1));
      if (g < 0) continue;
      if (owner_row < 0) owner_row = r;
      else if (idx[owner_row] != g)
        check.fail("m_indices",
                   fmt::format("rows {} and {} of the aligned block [{}, {}) belong to groups {} and {}: each group's "
                               "rows must start at a multiple of the M alignment {} "
                               "(get_mk_alignment_for_contiguous_layout(); make_contiguous_layout() pads them)",
                               owner_row, r, block, block + alignment, idx[owner_row], g, alignment));
    }
  }
}

}  // namespace

void m_grouped_gemm_nt_contiguous(const DLTensor* lhs, const DLTensor* rhs, DLTensor* out,
                                  const DLTensor* m_indices) {
  MATE_API("ops.m_grouped_gemm_nt_contiguous", lhs, rhs, out, m_indices).outputs(MATE_ARGS(out)).run([&] {
    using tensor::ScalarType;
    detail::Checker check("m_grouped_gemm_nt_contiguous");
    const DLTensor& tl = check.tensor("lhs", lhs, 2);
    const DLTensor& tr = check.tensor("rhs", rhs, 3);
    const DLTensor& tout = check.tensor("out", out, 2);
    const DLTensor& ti = check.tensor("m_indices", m_indices, 1);
    check.dtype("lhs", tl, {ScalarType::F32, ScalarType::BF16});
    check.same_dtype("rhs", tr, "lhs", tl);
    check.dtype("out", tout, {ScalarType::F32});
    check.dtype("m_indices", ti, {ScalarType::I32});
    std::int64_t m_sum = tl.shape[0], k = tl.shape[1], groups = tr.shape[0], n = tr.shape[1];
    check.dim("rhs", tr, 2, k, "k, the columns of 'lhs': rhs is [groups, n, k] in the NT layout");
    check.dim("out", tout, 0, m_sum, "m_sum, the rows of 'lhs'");
    check.dim("out", tout, 1, n, "n, dimension 1 of 'rhs'");
    check.dim("m_indices", ti, 0, m_sum, "m_sum, one group index per row of 'lhs'");
    check.no_overlap("out", tout, "lhs", tl);
    check.no_overlap("out", tout, "rhs", tr);
    check.no_overlap("out", tout, "m_indices", ti);
    std::int64_t alignment = get_mk_alignment_for_contiguous_layout();
    if (m_sum % alignment != 0)
      check.fail("lhs", fmt::format("has m_sum = {} rows, not a multiple of the M alignment {} "
                                    "(get_mk_alignment_for_contiguous_layout(), MATE_DEEPGEMM_MK_ALIGNMENT); pad "
                                    "each group's rows with make_contiguous_layout()",
                                    m_sum, alignment));
    auto placement = check.placement();

    InputType type = detail::Checker::input_type(tl);
    auto toolchain = detail::toolchain_for(placement);
    void* fn = detail::kernel_symbol("m_grouped_gemm_nt_contiguous", Kernel::GroupedGemmNt, type, toolchain,
                                     "mate_ops_grouped_gemm_nt");
    auto* pidx = detail::first_element<const std::int32_t>(ti);
    if (toolchain == jit::Toolchain::Host) {
      check_m_indices(check, pidx, m_sum, groups, alignment);
    } else if (m_sum > 0) {
      // The indices live on the device: the CUDA module copies them here to be checked.
      std::vector<std::int32_t> host(static_cast<std::size_t>(m_sum));
      using CopyFn = int(int, void*, const void*, unsigned long);
      auto* copy = reinterpret_cast<CopyFn*>(detail::kernel_symbol(
          "m_grouped_gemm_nt_contiguous", Kernel::GroupedGemmNt, type, toolchain, "mate_ops_copy_to_host"));
      int error = copy(placement.device.device_id, host.data(), pidx, host.size() * sizeof(std::int32_t));
      detail::check_cuda("m_grouped_gemm_nt_contiguous", Kernel::GroupedGemmNt, type, placement, error);
      check_m_indices(check, host.data(), m_sum, groups, alignment);
    }
    if (detail::dry_run()) return;
    auto* pl = detail::first_element<const void>(tl);
    auto* pr = detail::first_element<const void>(tr);
    auto* pout = detail::first_element<float>(tout);
    if (toolchain == jit::Toolchain::Host) {
      using HostFn = void(long, long, long, const void*, const void*, const std::int32_t*, float*);
      reinterpret_cast<HostFn*>(fn)(m_sum, n, k, pl, pr, pidx, pout);
    } else {
      using CudaFn = int(int, long, long, long, const void*, const void*, const std::int32_t*, float*);
      int error = reinterpret_cast<CudaFn*>(fn)(placement.device.device_id, m_sum, n, k, pl, pr, pidx, pout);
      detail::check_cuda("m_grouped_gemm_nt_contiguous", Kernel::GroupedGemmNt, type, placement, error);
    }
  });
}

}  // namespace mate::ops
