// mate/ops/contiguous_layout.hpp — the M-axis layout of DeepGEMM's contiguous grouped GEMM:
// every group's (expert's) rows form one segment, padded to the M alignment, and m_indices
// gives each row's group (-1 for padding rows).
//
// Contract:
//  * get_mk_alignment_for_contiguous_layout() is 128, or 256 when MATE_DEEPGEMM_MK_ALIGNMENT
//    says so. The registry reads the variable once, on first use, and keeps the value (an
//    invalid value throws mate::config::ConfigError naming the variable and 128|256).
//  * make_contiguous_layout() pads each segment to a multiple of the alignment (an empty group
//    takes no rows) and builds m_indices; m_grouped_gemm_nt_contiguous() accepts exactly the
//    layouts it makes. Negative row counts or an alignment below 1 are an ArgumentError.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mate::ops {

int get_mk_alignment_for_contiguous_layout();

struct ContiguousLayout {
  std::int64_t alignment = 0;
  std::int64_t m_sum = 0;                    // total rows, padding included
  std::vector<std::int64_t> group_offsets;  // first row of group g
  std::vector<std::int64_t> group_rows;     // rows of group g (without padding)
  std::vector<std::int32_t> m_indices;      // m_sum entries: the group of each row, -1 for padding
};

// group_rows[g] is the number of rows of group g; the alignment is
// get_mk_alignment_for_contiguous_layout().
ContiguousLayout make_contiguous_layout(std::span<const std::int64_t> group_rows);
ContiguousLayout make_contiguous_layout(std::span<const std::int64_t> group_rows, std::int64_t alignment);

}  // namespace mate::ops
