// What a logged call allocates, counted by replacing operator new in this program (its own
// binary: the replacement would count every other test's allocations too).
//
// At level 1 a MATE_API call writes one line and allocates nothing: no call state of its own
// (every such call shares one, see line_only_state in src/log/call.cpp), the line rendered on
// the stack, the settings borrowed from the thread's snapshot. At level 3 (text) it allocates
// nothing either: its state goes in the block the thread's previous call left (new_state_block).
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <string>

#include "log_to_file.hpp"
#include "mate/log/api.hpp"

namespace {
thread_local long t_allocations = 0;
}  // namespace

void* operator new(std::size_t n) {
  ++t_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

int twice(int v) {
  return MATE_API("twice", v).run([&] { return 2 * v; });
}

// A logged call whose body makes another.
int twice_twice(int v) {
  return MATE_API("twice_twice", v).run([&] { return twice(twice(v)); });
}

class LogAllocations : public ::testing::Test, protected mate::testing::LogToFile {
 protected:
  LogAllocations() : LogToFile("mate_log_allocations") {}
  void TearDown() override { restore(); }

  // Allocations on this thread during `calls` calls of twice(), after one to warm up (the
  // settings snapshot, the shared line-only state and the sink are made on first use).
  long allocations_during(int calls, int (*call)(int) = twice) {
    call(0);
    const long before = t_allocations;
    for (int i = 0; i < calls; ++i) call(i);
    return t_allocations - before;
  }
};

// In text (the JSON format builds a JSON object per record).
TEST_F(LogAllocations, LevelOneAllocatesNothingPerCall) {
  configure(1);
  EXPECT_EQ(allocations_during(100), 0);
  EXPECT_NE(log().find("] twice\n"), std::string::npos) << "the calls were logged";
}

TEST_F(LogAllocations, LevelThreeReusesTheThreadsCallStateBlock) {
  configure(3);
  EXPECT_EQ(allocations_during(100), 0);
  EXPECT_NE(log().find("] twice outputs"), std::string::npos) << "the calls were logged";
}

// The thread keeps one spare block: while the outer call holds it, each nested call allocates
// its own (which then becomes the spare, and the outer call's block is freed). This is also
// what shows that the counting counts.
TEST_F(LogAllocations, ANestedCallAllocatesItsOwnCallState) {
  configure(3);
  EXPECT_EQ(allocations_during(100, twice_twice), 100);
}

}  // namespace
