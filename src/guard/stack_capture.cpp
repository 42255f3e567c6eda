#include "stack_capture.hpp"

#include <dlfcn.h>
#include <unwind.h>

#include <atomic>
#include <cstdint>

#include "table_unwinder.hpp"

namespace mate::guard {

namespace {

using BacktraceFn = _Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void*);
using GetIpFn = _Unwind_Ptr (*)(struct _Unwind_Context*);

struct Walk {
  void** frames;
  int max;
  int n;
  int skip;  // frames of this file's own functions still to pass
  GetIpFn get_ip;
};

// The process's C++ unwinder (libgcc_s) when it has one in the global scope, else the one linked
// in: the guard's preload carries a private copy of libgcc's, which would not know the frames
// JIT code registers with the process's unwinder (__register_frame). Looked up while not found:
// a C program may load libgcc_s later.
std::atomic<BacktraceFn> g_backtrace{nullptr};
std::atomic<GetIpFn> g_get_ip{nullptr};

void process_unwinder(BacktraceFn* backtrace, GetIpFn* get_ip) noexcept {
  BacktraceFn b = g_backtrace.load(std::memory_order_acquire);
  if (b == nullptr) {
    auto* found_backtrace = reinterpret_cast<BacktraceFn>(dlsym(RTLD_DEFAULT, "_Unwind_Backtrace"));
    auto* found_get_ip = reinterpret_cast<GetIpFn>(dlsym(RTLD_DEFAULT, "_Unwind_GetIP"));
    if (found_backtrace != nullptr && found_get_ip != nullptr) {
      g_get_ip.store(found_get_ip, std::memory_order_relaxed);
      g_backtrace.store(found_backtrace, std::memory_order_release);
      b = found_backtrace;
    }
  }
  if (b == nullptr) {
    *backtrace = _Unwind_Backtrace;
    *get_ip = _Unwind_GetIP;
    return;
  }
  *backtrace = b;
  *get_ip = g_get_ip.load(std::memory_order_relaxed);
}

_Unwind_Reason_Code record_frame(struct _Unwind_Context* context, void* arg) {
  auto* walk = static_cast<Walk*>(arg);
  const std::uintptr_t ip = walk->get_ip(context);
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
  Walk walk{frames, max, 0, 2, nullptr};
  BacktraceFn backtrace = nullptr;
  if (max > 0) process_unwinder(&backtrace, &walk.get_ip);
  if (max > 0) backtrace(record_frame, &walk);
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
