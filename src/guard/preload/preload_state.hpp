// State the preload library's host and device interposers share.
#pragma once

#include "mate/guard/allocator.hpp"

namespace mate::guard::preload {

// True while this thread is inside the guard (its own allocations go to the real allocator).
bool& inside_flag() noexcept;

// Nests: an inner scope leaves the flag as the outer one set it.
struct Inside {
  Inside() noexcept : was_inside_(inside_flag()) { inside_flag() = true; }
  ~Inside() { inside_flag() = was_inside_; }
  Inside(const Inside&) = delete;
  Inside& operator=(const Inside&) = delete;

 private:
  bool was_inside_;
};

// Ends the library's own initialization (every allocation until then is its own, served by its
// arena) and starts the guard. Called once, by the library's last initializer.
void start_guarding() noexcept;

// Looks up the C library's sigaction for the fault handler, which changes real dispositions past
// the preload's own interposer (preload_signals.cpp). Before the guard installs.
void resolve_signal_functions() noexcept;

// The configuration read from the bootstrap variables; nullptr when guard-run did not ask for
// the guard (MATE_GUARD_ALLOCATOR_AUTO_INSTALL unset) or it is not started yet.
const GuardAllocatorConfig* bootstrap_config() noexcept;

}  // namespace mate::guard::preload
