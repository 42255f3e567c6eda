// main() of every MATE test program: GoogleTest, plus the suite's guard mode (guard_test_mode.hpp)
// and sharding by file (test_shards.hpp). Bad flags or variables end with status 2 and a message
// naming what was wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <exception>
#include <vector>

#include "guard_test_mode.hpp"
#include "test_shards.hpp"

int main(int argc, char** argv) {
  try {
    const std::vector<char*> original(argv, argv + argc + 1);  // re-executed as given
    const mate::testing::GuardTestOptions guard = mate::testing::take_guard_test_options(argc, argv);
    mate::testing::enter_guard_test_mode(guard, original.data());
    ::testing::InitGoogleMock(&argc, argv);
    mate::testing::select_test_shard();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
  return RUN_ALL_TESTS();
}
