// The pluggable-allocator C ABI through the fake driver, loaded by name as a framework does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "subprocess.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The child also prints which device the fake driver placed its allocation on ("device N").
mate::testing::RunResult run_hooks(const char* what, std::map<std::string, std::string> env = {}) {
  mate::testing::RunOptions options;
  options.env = std::move(env);
  options.env["MATE_FAKE_DRIVER_PATH"] = MATE_FAKE_DRIVER_LIBRARY;
  return mate::testing::run({MATE_HOOKS_CHILD, MATE_HOOKS_LIBRARY, what, MATE_FAKE_DRIVER_LIBRARY}, options);
}

TEST(PluggableAllocator, AllocatesGuardedDeviceMemory) {
  auto r = run_hooks("ok", {{"MATE_GUARD_ALLOCATOR_LOG_ALLOCATIONS", "1"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("done"));
  EXPECT_THAT(r.err, HasSubstr("mate_guard_alloc: invalid device 1: "));
  EXPECT_THAT(r.err, HasSubstr("mate_guard_alloc: invalid device -1: accepted ordinals are 0 to 7"));
  EXPECT_THAT(r.err, HasSubstr(" size 1000 mode tail cuda guard ["));
  EXPECT_THAT(r.err, HasSubstr("canary intact"));
  EXPECT_THAT(r.out, HasSubstr("device 0\n"));
}

TEST(PluggableAllocator, HonoursTheDeviceOrdinal) {
  auto r = run_hooks("device1", {{"MATE_GUARD_ALLOCATOR_LOG_ALLOCATIONS", "1"}, {"FAKE_DRIVER_DEVICE_COUNT", "2"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("done"));
  EXPECT_THAT(r.err, HasSubstr("mate guard: alloc #1 user ["));
  // The log names the ordinal of a device other than 0; the memory is that device's.
  EXPECT_THAT(r.err, HasSubstr(" size 1000 mode tail cuda:1 guard ["));
  EXPECT_THAT(r.err, HasSubstr("canary intact"));
  EXPECT_THAT(r.out, HasSubstr("device 1\n"));
  EXPECT_THAT(r.out, HasSubstr("device 0 contexts: 0\n"));  // none made on a device not used
  EXPECT_THAT(r.err, Not(HasSubstr("invalid device 1")));
}

TEST(PluggableAllocator, OverflowFaultsWithAReport) {
  auto r = run_hooks("overflow");
  EXPECT_THAT(r.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_THAT(r.err, HasSubstr("24 bytes past the end of allocation #1 of 1000 bytes"));
  EXPECT_THAT(r.err, HasSubstr("(tail mode, cuda memory"));
}

// Another ordinal's allocator is the hooks' own (not the process-wide one install_guard_allocator()
// makes): the hooks install the crash handler for it too.
TEST(PluggableAllocator, OverflowOnAnotherOrdinalFaultsWithAReport) {
  auto r = run_hooks("device1_overflow", {{"FAKE_DRIVER_DEVICE_COUNT", "2"}});
  EXPECT_THAT(r.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_THAT(r.err, HasSubstr("24 bytes past the end of allocation #1 of 1000 bytes"));
  EXPECT_THAT(r.err, HasSubstr("cuda:1 memory"));
}

TEST(PluggableAllocator, HeadModeAndDoubleFree) {
  auto r = run_hooks("double_free", {{"MATE_GUARD_ALLOCATOR_MODE", "head"}, {"MATE_DEVICE_DRIVER", "musa"}});
  EXPECT_EQ(r.term_signal, SIGABRT) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: double free of "));
  EXPECT_THAT(r.err, HasSubstr("(head mode, musa memory"));
}

}  // namespace
