// The program's own actions for SIGSEGV and SIGBUS while the guard's fault handler holds the
// real ones: the fault handler passes faults outside the guard's ranges (and signals sent by a
// process) to them, and runs them after its report for faults inside.
//
// Without the preload's interposer (install_fault_handler() in a program of its own) the
// program's action is the one installed before the guard's, read once at install time. Under
// `mate guard-run` the preload interposes sigaction(), signal() and their aliases
// (preload/preload_signals.cpp): a handler the program installs later for SIGSEGV or SIGBUS is
// kept here instead of replacing the guard's, and asking for the current action answers with
// the program's, so the program sees what it would without the guard.
//
// Async-signal-safe and lock-free: set (from sigaction, which programs call in signal handlers
// too) and read (in the fault handler) at any time from any thread. Each action is written into
// one of a few slots and published by index; a reader copies the published slot and retries if
// a writer reused it meanwhile.
#pragma once

#include <signal.h>

namespace mate::guard {

using SigactionFunction = int (*)(int, const struct sigaction*, struct sigaction*);

// The sigaction the guard changes real dispositions with. The preload gives the C library's (the
// next definition after its own interposer); elsewhere it is sigaction().
void set_system_sigaction(SigactionFunction real) noexcept;
int system_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept;

// True for SIGSEGV and SIGBUS once the fault handler is installed: the signals whose program
// action lives here.
bool holds_program_action(int sig) noexcept;

// Records the action the program had when the fault handler was installed (install only).
void set_initial_program_action(int sig, const struct sigaction& action) noexcept;

// sigaction() for a held signal: *old (when not null) gets the program's current action, `act`
// (when not null) becomes it. Returns false, doing nothing, when `sig` is not held.
bool exchange_program_action(int sig, const struct sigaction* act, struct sigaction* old) noexcept;

// A copy of the program's current action for a held signal.
struct sigaction program_action(int sig) noexcept;

}  // namespace mate::guard
