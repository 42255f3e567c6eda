// Capturing the calling thread's return addresses: the table walk first, the C++ unwinder when it
// answers "unsupported" (see stack_capture.hpp).
#include "guard/stack/stack_capture.hpp"

#include <ucontext.h>
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

// Every frame the C++ unwinder sees from here, this function's own included.
__attribute__((noinline)) int walk_all_with_cxx_unwinder(void** frames, int max) noexcept {
  Walk walk{frames, max, 0, 0};
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

int capture_signal_stack(const void* context, void** frames, int max) noexcept {
  if (max <= 0) return 0;
#if defined(__x86_64__) && defined(__linux__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  const auto pc = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  const auto sp = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  const auto fp = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RBP]);
  // The walk takes each frame as a return address and uses the rule before it: pc + 1 gives
  // the rule at pc itself, where the access stopped.
  int walked = 0;
  if (walk_with_unwind_tables(pc + 1, sp, fp, frames, max, &walked) == TableWalk::kComplete && walked > 0) {
    frames[0] = reinterpret_cast<void*>(pc);
    return walked;
  }
  // The C++ unwinder crosses the kernel's signal frame (the restorer's bytes mark it) and gives
  // the interrupted instruction itself as that frame's address.
  constexpr int kRaw = 64;
  void* raw[kRaw];
  const int n = walk_all_with_cxx_unwinder(raw, kRaw);
  for (int i = 0; i < n; ++i) {
    if (reinterpret_cast<std::uintptr_t>(raw[i]) != pc) continue;
    int kept = 0;
    for (int j = i; j < n && kept < max; ++j) frames[kept++] = raw[j];
    return kept;
  }
  frames[0] = reinterpret_cast<void*>(pc);  // the faulting instruction at least
  return 1;
#else
  (void)context, (void)frames;
  return 0;
#endif
}

}  // namespace mate::guard
