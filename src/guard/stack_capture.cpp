#include "stack_capture.hpp"

#include <unwind.h>

#include <cstdint>

namespace mate::guard {

namespace {

struct Walk {
  void** frames;
  int max;
  int n;
  bool skipped_self;  // the first frame is capture_stack's own
};

_Unwind_Reason_Code record_frame(struct _Unwind_Context* context, void* arg) {
  auto* walk = static_cast<Walk*>(arg);
  const std::uintptr_t ip = _Unwind_GetIP(context);
  if (ip == 0) return _URC_END_OF_STACK;
  if (!walk->skipped_self) {
    walk->skipped_self = true;
    return _URC_NO_REASON;
  }
  if (walk->n >= walk->max) return _URC_END_OF_STACK;
  walk->frames[walk->n++] = reinterpret_cast<void*>(ip);
  return _URC_NO_REASON;
}

}  // namespace

__attribute__((noinline)) int capture_stack(void** frames, int max) noexcept {
  Walk walk{frames, max, 0, false};
  if (max > 0) _Unwind_Backtrace(record_frame, &walk);
  return walk.n;
}

}  // namespace mate::guard
