// The test suite's guard mode (seed 001, "test-suite integration"): every MATE test program can
// run with the guarded allocator installed before any test code allocates, the C++ counterpart
// of the seed's in-repository pytest plugin.
//
//   test_x --guard-alloc [--guard-mode tail|head] [--guard-log-allocations]
//   MATE_PYTEST_GUARD_ALLOC=1 [MATE_PYTEST_GUARD_MODE=head] ctest --preset default
//
// The flags override the variables; --no-guard-alloc and --no-guard-log-allocations turn a
// default from the environment off. In guard mode the program re-executes itself the way
// `mate guard-run` starts a program (the preload library, the bootstrap variables), so the
// allocator is in place before static initializers and test registration run again. Tests that
// cannot run on guarded memory say so with MATE_GUARD_INCOMPATIBLE and are skipped.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace mate::testing {

// AddressSanitizer and ThreadSanitizer own malloc (the asan and tsan presets): guard mode, and
// any test that runs a program under `mate guard-run` (the preload), cannot run there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif

struct GuardTestOptions {
  bool guard_alloc = false;
  std::string mode = "tail";  // tail or head
  bool log_allocations = false;
  // Whether the user chose mode / log_allocations (a flag, or a variable set in the
  // environment), rather than taking the default: only a choice can conflict with a guard
  // already in force.
  bool mode_chosen = false;
  bool log_allocations_chosen = false;
};

// Reads the defaults from MATE_PYTEST_GUARD_ALLOC / _MODE / _LOG_ALLOCATIONS, then takes the
// guard flags out of argv (so GoogleTest never sees them). Throws std::invalid_argument (or the
// registry's ConfigError) naming the bad flag or value and what is accepted; an unknown flag
// starting with --guard or --no-guard is an error rather than passed on to GoogleTest, which
// would ignore it and run unguarded.
GuardTestOptions take_guard_test_options(int& argc, char** argv);

// Puts this process in the state `options` asks for: returns at once when guard mode is off or
// already in force; otherwise re-executes the program (`argv`: its arguments as given, flags
// included) under the preload library and does not return. Throws std::runtime_error when guard
// mode cannot be had: a sanitizer build, the preload missing, or a guard already in force with
// another mode or allocation log than the one chosen.
void enter_guard_test_mode(const GuardTestOptions& options, char* const* argv);

// True when this process's allocations go through the guarded allocator's preload library
// (--guard-alloc, MATE_PYTEST_GUARD_ALLOC=1, or the whole run started by `mate guard-run`).
bool running_guarded();

}  // namespace mate::testing

// First statement of a test that cannot run on guarded memory (it installs its own allocator,
// counts mappings, measures memory, ...): skipped in guard mode with the reason, like the seed's
// @pytest.mark.guard_incompatible.
#define MATE_GUARD_INCOMPATIBLE(reason)          \
  if (::mate::testing::running_guarded())        \
  GTEST_SKIP() << "guard allocator debug mode does not support " << reason
