// Sharding by source file: the shard of a file, and the filter that keeps one shard.
#include "test_shards.hpp"

#include <fnmatch.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "mate/config.hpp"
#include "mate/core/test_shard.hpp"

namespace mate::testing {

namespace {

std::string_view file_key(std::string_view file) { return core::test_file_key(file); }

// GoogleTest's filter syntax: "POSITIVE[-NEGATIVE]", each a ':'-separated list of patterns
// with * and ?. Needed to name only the tests the run would otherwise have selected.
bool matches_any(const std::string& patterns, const std::string& name) {
  std::size_t start = 0;
  while (start <= patterns.size()) {
    std::size_t end = patterns.find(':', start);
    if (end == std::string::npos) end = patterns.size();
    const std::string pattern = patterns.substr(start, end - start);
    if (!pattern.empty() && fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
    start = end + 1;
  }
  return false;
}

bool selected_by(const std::string& filter, const std::string& name) {
  const std::size_t dash = filter.find('-');
  std::string positive = filter.substr(0, dash);
  if (positive.empty()) positive = "*";
  if (!matches_any(positive, name)) return false;
  return dash == std::string::npos || !matches_any(filter.substr(dash + 1), name);
}

}  // namespace

std::int64_t shard_of_file(std::string_view file, std::int64_t total) { return core::shard_of_test_file(file, total); }

void select_test_shard() {
  const std::int64_t total = config::pytest_shard_total();
  const std::int64_t index = config::pytest_shard_index();
  (void)config::pytest_shard_mode();  // validated: "file" is the only mode
  if (std::string error = config::shard_index_error(index, total); !error.empty()) throw std::invalid_argument(error);
  // A listing (ctest's discovery) names every test: the ctest entries it makes are each run
  // later, with the shard variables in force then.
  if (total <= 1 || GTEST_FLAG_GET(list_tests)) return;
  const std::string filter = GTEST_FLAG_GET(filter);
  std::string excluded;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const ::testing::TestInfo& test = *suite.GetTestInfo(t);
      const std::int64_t shard = shard_of_file(test.file(), total);
      if (shard == index) continue;
      const std::string name = std::string(suite.name()) + "." + test.name();
      if (selected_by(filter, name))
        std::printf("[  SKIPPED ] %s: its file %s is in shard %lld; this is shard %lld of %lld (MATE_PYTEST_SHARD_*)\n",
                    name.c_str(), std::string(file_key(test.file())).c_str(), static_cast<long long>(shard),
                    static_cast<long long>(index), static_cast<long long>(total));
      excluded += ":" + name;
    }
  }
  if (excluded.empty()) return;
  // Appending to the negative part keeps whatever the user's own filter selects or excludes.
  GTEST_FLAG_SET(filter, filter.find('-') == std::string::npos ? filter + "-" + excluded.substr(1) : filter + excluded);
}

}  // namespace mate::testing
