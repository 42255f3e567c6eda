// Who installs the guard's crash handler (the SIGSEGV/SIGBUS handler that turns a guard fault
// into a report): install_guard_allocator() (and through it the preload, the pluggable hooks'
// process-wide allocator and `mate replay --guard-alloc`) and install_fault_handler(); never a
// GuardAllocator's constructor. The handler is process-wide, so each check runs in a child
// (EXPECT_EXIT) and compares sigaction's answer before and after. The pluggable hooks' allocators
// of other device ordinals are checked in test_pluggable.cpp (a fault on device 1 is reported).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>

#include "guard_test_mode.hpp"
#include "mate/device/backend.hpp"
#include "mate/guard/allocator.hpp"

namespace {

using mate::guard::GuardAllocator;
using mate::guard::GuardAllocatorConfig;
using ::testing::HasSubstr;
using ::testing::Not;

// The SIGSEGV and SIGBUS dispositions now.
struct Handlers {
  void (*segv)(int, siginfo_t*, void*) = nullptr;
  void (*bus)(int, siginfo_t*, void*) = nullptr;
  bool operator==(const Handlers&) const = default;
};

Handlers current_handlers() {
  struct sigaction segv {};
  struct sigaction bus {};
  sigaction(SIGSEGV, nullptr, &segv);
  sigaction(SIGBUS, nullptr, &bus);
  return {segv.sa_sigaction, bus.sa_sigaction};
}

GuardAllocatorConfig small_config() {
  GuardAllocatorConfig c;
  c.max_allocations = 64;
  return c;
}

// 0 when constructing, using and destroying an allocator leaves both dispositions as they were.
int construct_directly() {
  const Handlers before = current_handlers();
  {
    GuardAllocator guard(mate::device::host_backend(), small_config());
    auto r = guard.allocate(100);
    if (!r) return 3;
    if (guard.deallocate(r.ptr) != mate::guard::FreeResult::Ok) return 4;
    if (!(current_handlers() == before)) return 1;
  }
  return current_handlers() == before ? 0 : 2;
}

// 0 when `install` changes both dispositions.
template <class Install>
int changes_both_handlers(Install install) {
  const Handlers before = current_handlers();
  install();
  const Handlers after = current_handlers();
  if (after.segv == before.segv) return 1;
  if (after.bus == before.bus) return 2;
  return 0;
}

TEST(CrashHandlerInstallDeathTest, AGuardAllocatorConstructedDirectlyInstallsNone) {
  MATE_GUARD_INCOMPATIBLE("a test of who installs the crash handler (the preload has)");
  EXPECT_EXIT(std::_Exit(construct_directly()), ::testing::ExitedWithCode(0), "");
}

TEST(CrashHandlerInstallDeathTest, InstallGuardAllocatorInstallsIt) {
  MATE_GUARD_INCOMPATIBLE("a test of who installs the crash handler (the preload has)");
  EXPECT_EXIT(std::_Exit(changes_both_handlers([] { mate::guard::install_guard_allocator(small_config()); })),
              ::testing::ExitedWithCode(0), "");
}

TEST(CrashHandlerInstallDeathTest, InstallFaultHandlerInstallsItOnce) {
  MATE_GUARD_INCOMPATIBLE("a test of who installs the crash handler (the preload has)");
  EXPECT_EXIT(std::_Exit(changes_both_handlers([] {
                GuardAllocator* guard = new GuardAllocator(mate::device::host_backend(), small_config());
                (void)guard;
                mate::guard::install_fault_handler();
                const Handlers first = current_handlers();
                mate::guard::install_fault_handler();  // a second call changes nothing
                if (!(current_handlers() == first)) std::_Exit(5);
              })),
              ::testing::ExitedWithCode(0), "");
}

// The overflow a directly constructed allocator's guard catches: reported once its owner installs
// the handler, and not reported (the process just dies of the fault) when it does not.
void overflow_past_the_guard(bool install) {
  GuardAllocator* guard = new GuardAllocator(mate::device::host_backend(), small_config());
  if (install) mate::guard::install_fault_handler();
  auto r = guard->allocate(64);
  if (!r) std::_Exit(3);
  *reinterpret_cast<volatile char*>(r.ptr + 64) = 1;  // tail mode: the first byte of the guard
  std::_Exit(4);
}

// (Any end: the fault's signal, or a sanitizer's exit after its own report.)
bool any_end(int) { return true; }

TEST(CrashHandlerInstallDeathTest, ADirectlyConstructedAllocatorsFaultIsReportedOnlyOnceInstalled) {
  MATE_GUARD_INCOMPATIBLE("a test of who installs the crash handler (the preload has)");
  EXPECT_EXIT(overflow_past_the_guard(true), any_end, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_EXIT(overflow_past_the_guard(false), any_end, Not(HasSubstr("mate guard:")));
}

}  // namespace
