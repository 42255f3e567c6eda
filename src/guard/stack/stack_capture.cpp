// Capturing the calling thread's return addresses: the table walk first, the C++ unwinder when it
// answers "unsupported" (see stack_capture.hpp).
#include "guard/stack/stack_capture.hpp"

#include <unwind.h>

#include <cstdint>

#include "guard/stack/table_unwinder.hpp"

namespace mate::guard {

namespace {

struct Walk {
  void** frames;
  int max;
  int n;
  int skip;  // frames of this file's own functions still to pass
};

_Unwind_Reason_Code record_frame(struct _Unwind_Context* context, void* arg) {
  auto* walk = static_cast<Walk*>(arg);
  const std::uintptr_t ip = _Unwind_GetIP(context);
  if (ip == 0) return _URC_END_OF_STACK;
  if (walk->skip > 0) {
    --walk->skip;
    return _URC_NO_REASON;
  }
  if (walk->n >= walk->max) return _URC_END_OF_STACK;
  walk->frames[walk->n++] = reinterpret_cast<void*>(ip);
  return _URC_NO_REASON;
}

// The walk's first frame is this function's, the second its caller's (one of the two below).
__attribute__((noinline)) int walk_with_cxx_unwinder(void** frames, int max) noexcept {
  Walk walk{frames, max, 0, 2};
  if (max > 0) _Unwind_Backtrace(record_frame, &walk);
  return walk.n;
}

}  // namespace

__attribute__((noinline)) int capture_stack_with_cxx_unwinder(void** frames, int max) noexcept {
  const int n = walk_with_cxx_unwinder(frames, max);
  asm volatile("" ::: "memory");  // not a tail call: this frame is one the walk skips
  return n;
}

// This function keeps a frame pointer (stack_capture.cpp is compiled with
// -fno-omit-frame-pointer): its frame's start is where the table walk begins.
__attribute__((noinline)) int capture_stack(void** frames, int max) noexcept {
  if (max <= 0) return 0;
#if defined(__x86_64__)
  auto* frame = static_cast<std::uintptr_t*>(__builtin_frame_address(0));
  // [frame] = the caller's rbp, [frame + 8] = the return address, frame + 16 = this frame's CFA.
  int walked = 0;
  if (walk_with_unwind_tables(frame[1], reinterpret_cast<std::uintptr_t>(frame + 2), frame[0], frames, max,
                              &walked) == TableWalk::kComplete)
    return walked;
#endif
  const int n = walk_with_cxx_unwinder(frames, max);
  asm volatile("" ::: "memory");  // not a tail call: this frame is one the walk skips
  return n;
}

}  // namespace mate::guard
