// Sharding by source file (test_shards.hpp): the shard probe's three files, split over 2 and 3
// shards, run every test exactly once, each file's tests together.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "subprocess.hpp"
#include "test_shards.hpp"

namespace {

using mate::testing::run;
using mate::testing::RunOptions;
using mate::testing::shard_of_file;
using ::testing::HasSubstr;

// The tests a run passed ("[       OK ] Suite.Name (0 ms)").
std::set<std::string> passed(const std::string& out) {
  std::set<std::string> names;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("[       OK ] ", 0) == 0) names.insert(line.substr(13, line.find(' ', 13) - 13));
  return names;
}

mate::testing::RunResult shard(int total, int index, const std::string& filter = "") {
  RunOptions options;
  options.env = {{"MATE_PYTEST_SHARD_TOTAL", std::to_string(total)}, {"MATE_PYTEST_SHARD_INDEX", std::to_string(index)}};
  std::vector<std::string> argv{MATE_SHARD_PROBE};
  if (!filter.empty()) argv.push_back("--gtest_filter=" + filter);
  return run(argv, options);
}

TEST(TestShards, AFileShardIsTheSameInEveryCheckout) {
  EXPECT_EQ(shard_of_file("/home/a/mate/tests/guard/test_canary.cpp", 7),
            shard_of_file("/srv/ci/build-42/tests/guard/test_canary.cpp", 7));
  EXPECT_EQ(shard_of_file("guard/test_canary.cpp", 7), shard_of_file("/x/guard/test_canary.cpp", 7));
  for (int total = 1; total < 10; ++total) {
    const auto s = shard_of_file("tests/log/test_format.cpp", total);
    EXPECT_GE(s, 0);
    EXPECT_LT(s, total);
  }
}

TEST(TestShards, EveryTestRunsInExactlyOneShardWithTheRestOfItsFile) {
  auto all = run({MATE_SHARD_PROBE});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const std::set<std::string> everything = passed(all.out);
  ASSERT_EQ(everything.size(), 6u) << all.out;
  for (int total : {2, 3}) {
    std::map<std::string, int> ran_in;
    std::set<int> non_empty;
    for (int index = 0; index < total; ++index) {
      auto r = shard(total, index);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      for (const auto& name : passed(r.out)) {
        EXPECT_EQ(ran_in.count(name), 0u) << name << " ran in two shards of " << total;
        ran_in[name] = index;
        non_empty.insert(index);
      }
    }
    std::set<std::string> ran;
    for (const auto& [name, index] : ran_in) ran.insert(name);
    EXPECT_EQ(ran, everything) << "over " << total << " shards";
    for (const char* file : {"a", "b", "c"}) {
      const std::string suite = std::string("ShardProbe_") + file;
      EXPECT_EQ(ran_in[suite + ".First"], ran_in[suite + ".Second"]) << suite;
      EXPECT_EQ(ran_in[suite + ".First"], shard_of_file(std::string("probes/shard_probe_") + file + ".cpp", total));
    }
    EXPECT_GT(non_empty.size(), 1u) << "the probe's files should spread over " << total << " shards";
  }
}

// ctest's discovery may run with the shard variables set: it must still see every test, or the
// tests of other shards would never become ctest entries.
TEST(TestShards, ListingNamesEveryTest) {
  RunOptions options;
  options.env = {{"MATE_PYTEST_SHARD_TOTAL", "2"}, {"MATE_PYTEST_SHARD_INDEX", "0"}};
  auto sharded = run({MATE_SHARD_PROBE, "--gtest_list_tests"}, options);
  auto plain = run({MATE_SHARD_PROBE, "--gtest_list_tests"});
  EXPECT_EQ(sharded.exit_code, 0) << sharded.err;
  EXPECT_EQ(sharded.out, plain.out);
  EXPECT_THAT(plain.out, HasSubstr("ShardProbe_a."));
}

TEST(TestShards, TestsOfOtherShardsAreReportedSkipped) {
  const int elsewhere = static_cast<int>(1 - shard_of_file("probes/shard_probe_b.cpp", 2));
  auto r = shard(2, elsewhere, "ShardProbe_b.First");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(passed(r.out).empty()) << r.out;
  EXPECT_THAT(r.out, HasSubstr("[  SKIPPED ] ShardProbe_b.First: its file probes/shard_probe_b.cpp is in shard "));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("ShardProbe_b.Second:")));  // not selected by the filter
}

TEST(TestShards, TheUsersFilterStillApplies) {
  const int home = static_cast<int>(shard_of_file("probes/shard_probe_b.cpp", 2));
  auto r = shard(2, home, "ShardProbe_b.*-ShardProbe_b.Second");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(passed(r.out), std::set<std::string>{"ShardProbe_b.First"});
}

TEST(TestShards, BadShardSettingsAreRefused) {
  auto r = shard(2, 2);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("MATE_PYTEST_SHARD_INDEX=2 is not below MATE_PYTEST_SHARD_TOTAL=2; accepted: 0 to 1"));
  RunOptions options;
  options.env = {{"MATE_PYTEST_SHARD_MODE", "test"}};
  auto mode = run({MATE_SHARD_PROBE}, options);
  EXPECT_EQ(mode.exit_code, 2);
  EXPECT_THAT(mode.err, HasSubstr("MATE_PYTEST_SHARD_MODE"));
  EXPECT_THAT(mode.err, HasSubstr("one of file"));
}

}  // namespace
