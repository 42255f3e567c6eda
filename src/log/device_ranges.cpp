// The address range of every non-CPU tensor a logged call takes goes into core's bounded ring
// (mate/core/recent_device_ranges.hpp), so that a device fault reported later at a synchronize
// (the guarded allocator's report) can name the allocations nearest to what recent calls touched.
#include <dlpack/dlpack.h>

#include "log_internal.hpp"
#include "mate/core/recent_device_ranges.hpp"

namespace mate::log::detail {

namespace {

void note(const char* call, std::uint64_t seq, const Arg& a) noexcept {
  if (a.kind == Arg::Kind::List) {
    for (const Arg& item : a.items) note(call, seq, item);
    return;
  }
  if (a.kind != Arg::Kind::Tensor || !a.tensor) return;
  const DLTensor& t = a.tensor->dl();
  if (t.device.device_type == kDLCPU || t.data == nullptr) return;
  const tensor::VaRange r = a.tensor->view().va_range();
  core::note_device_range(call, seq, r.lo, r.hi);
}

}  // namespace

void note_device_ranges(const char* call, std::uint64_t seq, const std::vector<Arg>& inputs) noexcept {
  for (const Arg& a : inputs) note(call, seq, a);
}

}  // namespace mate::log::detail
