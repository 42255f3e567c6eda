// A test program for tests/support/test_guard_test_mode.cpp: what a developer's tests look like
// to the suite's guard mode. Its tests are run one at a time, by --gtest_filter, as child
// processes; it is not itself a ctest entry (two of its tests have the bugs guard mode catches).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "guard_test_mode.hpp"

TEST(Probe, SaysWhetherItRunsGuarded) { std::printf("guarded=%d\n", mate::testing::running_guarded() ? 1 : 0); }

// The bugs: one element past, or one before, a heap buffer. Unguarded, both usually pass.
TEST(Probe, WritesOnePastAHeapBuffer) {
  // volatile: the compiler would drop a store to memory freed right after
  auto* values = static_cast<volatile int*>(std::malloc(64 * sizeof(int)));
  volatile int index = 64;
  values[index] = 1;
  std::free(const_cast<int*>(values));
}

TEST(Probe, WritesOneBeforeAHeapBuffer) {
  // volatile: the compiler would drop a store to memory freed right after
  auto* values = static_cast<volatile int*>(std::malloc(64 * sizeof(int)));
  volatile int index = -1;
  values[index] = 1;
  std::free(const_cast<int*>(values));
}

TEST(Probe, MarkedIncompatible) {
  MATE_GUARD_INCOMPATIBLE("this probe's own allocator");
  std::printf("the incompatible test ran\n");
}
