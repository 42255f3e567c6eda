// The async-signal-safe integer formatter against the standard library's formatting, at the
// edges (zero, the extremes of each type) and over many values.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "mate/core/signal_safe_format.hpp"

namespace {

using mate::core::decimal_text;
using mate::core::hex_text;
using mate::core::NumberText;
using mate::core::signed_decimal_text;

std::string text_of(const NumberText& t) {
  EXPECT_EQ(std::strlen(t.c_str()), t.size) << "size must count the characters before the NUL";
  return std::string(t.c_str(), t.size);
}

std::string printf_hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRIx64, v);
  return buf;
}

TEST(SignalSafeFormat, Edges) {
  constexpr auto u64_max = std::numeric_limits<std::uint64_t>::max();
  constexpr auto i64_min = std::numeric_limits<std::int64_t>::min();
  constexpr auto i64_max = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(text_of(decimal_text(0)), "0");
  EXPECT_EQ(text_of(decimal_text(9)), "9");
  EXPECT_EQ(text_of(decimal_text(10)), "10");
  EXPECT_EQ(text_of(decimal_text(u64_max)), "18446744073709551615");
  EXPECT_EQ(text_of(signed_decimal_text(0)), "0");
  EXPECT_EQ(text_of(signed_decimal_text(-1)), "-1");
  EXPECT_EQ(text_of(signed_decimal_text(i64_max)), "9223372036854775807");
  EXPECT_EQ(text_of(signed_decimal_text(i64_min)), "-9223372036854775808");
  EXPECT_EQ(text_of(hex_text(0)), "0");
  EXPECT_EQ(text_of(hex_text(0xdeadbeef)), "deadbeef");
  EXPECT_EQ(text_of(hex_text(0x10)), "10");
  EXPECT_EQ(text_of(hex_text(u64_max)), "ffffffffffffffff");
}

TEST(SignalSafeFormat, AgreesWithTheStandardLibrary) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 10000; ++i) {
    // Every magnitude: shift a random value right by a random amount.
    const std::uint64_t u = rng() >> (rng() % 64);
    const auto s = static_cast<std::int64_t>(rng()) >> (rng() % 64);
    ASSERT_EQ(text_of(decimal_text(u)), std::to_string(u));
    ASSERT_EQ(text_of(signed_decimal_text(s)), std::to_string(s));
    ASSERT_EQ(text_of(hex_text(u)), printf_hex(u));
  }
}

}  // namespace
