// UTC timestamps as lock files and module manifests record them.
#include <gtest/gtest.h>

#include <ctime>
#include <regex>

#include "mate/core/utc_time.hpp"

namespace {

TEST(UtcTime, KnownInstants) {
  EXPECT_EQ(mate::core::utc_iso8601(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(mate::core::utc_iso8601(1'000'000'000), "2001-09-09T01:46:40Z");
  EXPECT_EQ(mate::core::utc_iso8601(1'709'164'799), "2024-02-28T23:59:59Z");
  EXPECT_EQ(mate::core::utc_iso8601(1'709'164'800), "2024-02-29T00:00:00Z");  // leap day
}

TEST(UtcTime, NowIsTheCurrentSecondInIso8601) {
  const std::time_t before = std::time(nullptr);
  const std::string now = mate::core::utc_now_iso8601();
  const std::time_t after = std::time(nullptr);
  EXPECT_TRUE(std::regex_match(now, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)"))) << now;
  EXPECT_TRUE(now == mate::core::utc_iso8601(before) || now == mate::core::utc_iso8601(after)) << now;
}

// The per-thread cache of the current second must not leak into another second, and the
// microseconds are zero-padded to six digits.
TEST(UtcTime, MicrosecondsFormIsExactAcrossSecondsAndPadded) {
  using mate::core::utc_iso8601_micros;
  EXPECT_EQ(utc_iso8601_micros({1'000'000'000, 7'000}), "2001-09-09T01:46:40.000007Z");
  EXPECT_EQ(utc_iso8601_micros({1'000'000'000, 999'999'999}), "2001-09-09T01:46:40.999999Z");
  EXPECT_EQ(utc_iso8601_micros({1'000'000'001, 0}), "2001-09-09T01:46:41.000000Z");
  EXPECT_EQ(utc_iso8601_micros({1'709'164'799, 123'456'000}), "2024-02-28T23:59:59.123456Z");
  // A timespec that is not normalized still gets six digits (and no read outside the digit table).
  EXPECT_EQ(utc_iso8601_micros({1'000'000'000, -500'000'000}), "2001-09-09T01:46:40.500000Z");
  EXPECT_EQ(utc_iso8601_micros({1'000'000'000, 1'999'999'999}), "2001-09-09T01:46:40.999999Z");
  EXPECT_EQ(utc_iso8601_micros({1'709'164'800, 1'000}), "2024-02-29T00:00:00.000001Z");
  EXPECT_EQ(utc_iso8601_micros({1'000'000'000, 500'000'000}), "2001-09-09T01:46:40.500000Z") << "back to an earlier second";
}

}  // namespace
