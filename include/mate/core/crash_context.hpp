// mate/core/crash_context.hpp — extra lines for crash reports, from the components that know them.
//
// A fault report (the guard allocator's) calls every registered provider on the faulting thread,
// inside a signal handler. A provider formats what it knows, e.g. the API call in flight on this
// thread, into the buffer it is given.
//
// Contract for providers: async-signal-safe (no malloc, no locks, no stdio), write at most `cap`
// bytes, return how many were written (0 for nothing to say). Numbers can be formatted with
// mate/core/signal_safe_format.hpp, which is async-signal-safe.
#pragma once

#include <cstddef>

namespace mate::core {

using CrashContextProvider = std::size_t (*)(char* buffer, std::size_t cap) noexcept;

// Registers a provider (at most 8; duplicates ignored). Returns false when the table is full.
// Under `mate guard-run` the reports are written by the preload library, which carries its own
// copy of this table: the provider is handed to it too (through the C symbol below), so a
// report from the preload names the API call in flight in the guarded program. The first call
// looks the preload up with dlsym (the dynamic loader's lock): do not hold a lock of your own
// that a library constructor could also take. A provider must stay loaded for the life of the
// process (there is no unregistering; a dlclose'd provider would be called by a later report).
bool register_crash_context(CrashContextProvider provider) noexcept;

// The same in this copy of the table only (what the preload's exported registrar calls).
bool register_crash_context_here(CrashContextProvider provider) noexcept;

// The C symbol the guard's preload library exports for other copies of MATE in the process.
inline constexpr const char* kPreloadCrashContextRegistrar = "mate_guard_preload_register_crash_context";

// Calls every provider and writes their text to `fd`. Async-signal-safe.
void write_crash_context(int fd) noexcept;

}  // namespace mate::core
