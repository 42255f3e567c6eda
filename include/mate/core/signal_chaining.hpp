// mate/core/signal_chaining.hpp — passing a signal on to the action that was there before ours.
//
// MATE installs SIGSEGV/SIGBUS handlers of its own in two places: the guard's crash handler
// (src/guard/crash_handler) and the host read guard of statistics and dumps
// (src/tensor/host_read_guard.cpp). A signal that is not theirs goes to the program's action,
// exactly as the kernel would have delivered it; these are the pieces both use for that.
// Where the action is stored (and so SA_RESETHAND's one-shot reset of it) stays with each caller.
// All functions are async-signal-safe.
#pragma once

#include <signal.h>

namespace mate::core {

// A process sent it (kill, raise, tgkill, sigqueue) rather than an access raising it: si_addr
// means nothing then, and returning from the handler re-executes no faulting instruction.
inline bool sent_by_a_process(const siginfo_t* info) noexcept { return info == nullptr || info->si_code <= 0; }

// SIG_DFL and SIG_IGN are values of the handler field whatever the flags say (the kernel reads
// them so even with SA_SIGINFO): never called.
inline bool is_a_function(const struct sigaction& action) noexcept {
  return action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN;
}

// Puts the default disposition of `sig` back, through `set_action` (the guard's preload passes
// the C library's sigaction, its own interposer being in front of it). Returning from a fault's
// handler then re-executes the access, and the process ends with the original signal and
// address (a fault cannot be ignored: the kernel kills a process that ignores or blocks it).
using SetActionFunction = int (*)(int, const struct sigaction*, struct sigaction*);
void restore_default_action(int sig, SetActionFunction set_action = ::sigaction) noexcept;

// Runs `action`'s handler (is_a_function) as the kernel would have: with its sa_mask, and the
// signal itself unless SA_NODEFER, added to the thread's mask for the call, with the signal's
// information and the interrupted context (which it may change: a runtime that faults on purpose
// resumes elsewhere). The mask is put back after. SA_RESETHAND is the caller's to apply to where
// it stores the action, before this call.
void run_as_the_kernel_would(int sig, const struct sigaction& action, siginfo_t* info, void* context) noexcept;

}  // namespace mate::core
