// The ring of recent device ranges (mate/core/recent_device_ranges.hpp): bounded, newest first.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "mate/core/recent_device_ranges.hpp"

namespace {

using namespace mate::core;

TEST(RecentDeviceRanges, KeepsTheNewestRangesNewestFirst) {
  clear_recent_device_ranges();
  RecentDeviceRange out[kRecentDeviceRanges];
  EXPECT_EQ(recent_device_ranges(out), 0u);
  note_device_range("empty", 1, 0x2000, 0x2000);  // empty ranges are not recorded
  EXPECT_EQ(recent_device_ranges(out), 0u);
  for (std::uint64_t i = 0; i < kRecentDeviceRanges + 5; ++i) note_device_range("gemm", i, 0x1000 * (i + 1), 0x1000 * (i + 1) + 16);
  ASSERT_EQ(recent_device_ranges(out), kRecentDeviceRanges);
  EXPECT_EQ(out[0].seq, kRecentDeviceRanges + 4);
  EXPECT_EQ(out[kRecentDeviceRanges - 1].seq, 5u);
  EXPECT_EQ(out[0].hi - out[0].lo, 16u);
  EXPECT_STREQ(out[0].call, "gemm");
  const std::string long_name(100, 'n');
  note_device_range(long_name.c_str(), 99, 0x10, 0x20);
  recent_device_ranges(out);
  EXPECT_EQ(std::strlen(out[0].call), sizeof(out[0].call) - 1);  // truncated, terminated
  clear_recent_device_ranges();
  EXPECT_EQ(recent_device_ranges(out), 0u);
}

}  // namespace
