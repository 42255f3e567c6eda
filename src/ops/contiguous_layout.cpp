// The DeepGEMM contiguous layout: the M alignment and the padding of group segments.
#include "mate/ops/contiguous_layout.hpp"

#include <fmt/format.h>

#include <limits>

#include "mate/config.hpp"
#include "mate/ops/ops.hpp"

namespace mate::ops {

int get_mk_alignment_for_contiguous_layout() {
  // The registry latches MATE_DEEPGEMM_MK_ALIGNMENT on first use and validates it (128|256).
  return static_cast<int>(config::deepgemm_mk_alignment());
}

ContiguousLayout make_contiguous_layout(std::span<const std::int64_t> group_rows) {
  return make_contiguous_layout(group_rows, get_mk_alignment_for_contiguous_layout());
}

ContiguousLayout make_contiguous_layout(std::span<const std::int64_t> group_rows, std::int64_t alignment) {
  if (alignment < 1)
    throw ArgumentError(fmt::format("mate::ops::make_contiguous_layout: alignment {} is not positive (accepted: "
                                    "get_mk_alignment_for_contiguous_layout(), 128 or 256)",
                                    alignment));
  if (group_rows.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw ArgumentError("mate::ops::make_contiguous_layout: more groups than int32 m_indices can name");
  ContiguousLayout layout;
  layout.alignment = alignment;
  for (std::size_t g = 0; g < group_rows.size(); ++g) {
    std::int64_t rows = group_rows[g];
    if (rows < 0)
      throw ArgumentError(fmt::format("mate::ops::make_contiguous_layout: group {} has {} rows (accepted: >= 0)",
                                      g, rows));
    std::int64_t padded = (rows + alignment - 1) / alignment * alignment;
    layout.group_offsets.push_back(layout.m_sum);
    layout.group_rows.push_back(rows);
    layout.m_indices.insert(layout.m_indices.end(), rows, static_cast<std::int32_t>(g));
    layout.m_indices.insert(layout.m_indices.end(), padded - rows, -1);
    layout.m_sum += padded;
  }
  return layout;
}

}  // namespace mate::ops
