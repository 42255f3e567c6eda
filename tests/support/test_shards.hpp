// Sharding the test suite by source file (MATE_PYTEST_SHARD_TOTAL / _INDEX / _MODE, seed 000):
// with TOTAL > 1, each test program runs only the tests of the source files that fall in shard
// INDEX, so TOTAL machines or jobs, each given one INDEX, run every test exactly once.
//
// A file's shard is a hash of its last two path components ("guard/test_canary.cpp"), so the
// split is the same in every checkout, whatever the source directory, and every test of one
// file runs in one shard. Tests of other shards are named on stdout as "[  SKIPPED ]" (ctest
// then counts them as skipped, not passed) and filtered out.
#pragma once

#include <cstdint>
#include <string_view>

namespace mate::testing {

// The shard (0 .. total-1) of the tests defined in `file` (a path as __FILE__ gives it).
std::int64_t shard_of_file(std::string_view file, std::int64_t total);

// Reads the shard variables and narrows GoogleTest's filter to this shard. Call after
// InitGoogleTest. Throws std::invalid_argument when INDEX is not below TOTAL.
void select_test_shard();

}  // namespace mate::testing
