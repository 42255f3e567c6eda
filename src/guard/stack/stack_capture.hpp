// Capture of the calling thread's return addresses, for allocation and free backtraces.
//
// Walks the stack from the unwind tables read from the modules' files, with a rule cache
// (table_unwinder.hpp), and where that walk cannot, with the C++ unwinder (_Unwind_Backtrace;
// in the guard's preload, the private copy of libgcc's linked into it) rather than glibc's
// backtrace(): backtrace() reaches the same unwinder through a
// dlopen of libgcc_s on its first call, which costs a few hundred KiB of resident memory in every
// guarded process and allocates. The preload's private unwinder has a lock of its own: the
// program's libgcc_s calls malloc while holding its lock (sorting the frames JIT code registered
// with __register_frame), and a guarded malloc capturing through that same unwinder would
// deadlock; the price is that frames registered that way are unknown to the private copy, so
// such backtraces stop at JIT code. Not async-signal-safe (the unwinder takes the loader's lock);
// called only from the allocator's entry points.
#pragma once

namespace mate::guard {

// Fills `frames` with up to `max` return addresses, starting with the caller of capture_stack;
// returns how many.
int capture_stack(void** frames, int max) noexcept;
// The same with the C++ unwinder only (the fallback; tests compare the two).
int capture_stack_with_cxx_unwinder(void** frames, int max) noexcept;

// In a signal handler, the interrupted thread's stack: frames[0] is the instruction the signal
// interrupted (for a fault, the faulting access), then return addresses. `context` is the
// handler's ucontext_t. Walked with the table unwinder from the registers the kernel saved (the
// rule at frames[0] is the one at that instruction, not before it); where that walk cannot go,
// with the C++ unwinder through the kernel's signal frame, keeping the frames from the
// interrupted instruction on. Returns how many (at least 1 on x86-64 Linux; 0 elsewhere). The same
// locking as capture_stack: it takes the loader's lock, recursive (the faulting thread may
// hold it already), and allocates nothing.
int capture_signal_stack(const void* context, void** frames, int max) noexcept;

}  // namespace mate::guard
