// mate/core/test_shard.hpp — which shard a test file belongs to (MATE_PYTEST_SHARD_*, seed 000),
// for every test runner MATE serves: its GoogleTest main (tests/support/test_shards.cpp) and the
// pytest plugin (mate.pytest_plugin), so that both split the same way.
//
// A file's shard is an FNV-1a hash of its last two path components ("guard/test_canary.cpp",
// "python/test_replay.py") modulo the shard count: the same on every machine and checkout,
// whatever the order tests are collected in, and every test of one file in one shard.
#pragma once

#include <cstdint>
#include <string_view>

namespace mate::core {

// The last two components of `path` (all of it when it has fewer).
std::string_view test_file_key(std::string_view path) noexcept;

// The shard (0 .. total-1) of the tests in `path`; total >= 1.
std::int64_t shard_of_test_file(std::string_view path, std::int64_t total) noexcept;

}  // namespace mate::core
