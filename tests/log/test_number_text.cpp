// write_general6 and write_fixed1 (src/log/number_text.hpp) against printf itself, over values
// of every magnitude, ties and near-ties included; write_address against std::to_chars.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cfenv>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "log/number_text.hpp"

namespace {

std::string printf_text(const char* format, double v) {
  char buf[400];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string general6(double v) {
  char buf[mate::log::detail::kGeneral6Max];
  return std::string(buf, mate::log::detail::write_general6(v, buf));
}

std::string fixed1(double v) {
  char buf[mate::log::detail::kFixed1Max];
  return std::string(buf, mate::log::detail::write_fixed1(v, buf));
}

std::vector<double> special_values() {
  std::vector<double> v = {0.0, -0.0, 1.0, -1.0, 0.5, 0.625, 1.5, -2.0, 3.0, 20.0, 100000.0, 999999.0,
                           999999.5, 999999.49999, 9999995.0, 0.1, 0.2, 0.3, 1e-4, 9.999995e-5, 1.234565,
                           1.2345650000001, 123456.5, 1234565.0, 0.05, 0.25, 0.35, 0.45, 1e15, 1e16, 1e22, 1e23,
                           1e-17, 1e-18, 1e-300, 5e-324, std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(), 0.04, -0.04, 0.05, -0.05, 0.15, 2.25, 1e14,
                           99999999999999.95, 1e300};
  for (int e = -30; e <= 30; ++e) {
    const double p = std::pow(10.0, e);
    for (double m : {1.0, 1.5, 9.999995, 9.9999949999, 1.000005, 4.5, 0.999999}) {
      v.push_back(m * p);
      v.push_back(-m * p);
      v.push_back(std::nextafter(m * p, 0.0));
      v.push_back(std::nextafter(m * p, 1e308));
    }
  }
  return v;
}

TEST(NumberText, General6IsPrintfs) {
  for (double v : special_values()) EXPECT_EQ(general6(v), printf_text("%.6g", v)) << printf_text("%.17g", v);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> exponent(-25.0, 25.0), mantissa(-1.0, 1.0);
  for (int i = 0; i < 300000; ++i) {
    const double v = mantissa(rng) * std::pow(10.0, exponent(rng));
    ASSERT_EQ(general6(v), printf_text("%.6g", v)) << printf_text("%.17g", v);
  }
  // Six-digit values and the halves between them: the ties the fast path must leave alone.
  for (int i = 0; i < 200000; ++i) {
    const double v = (100000 + static_cast<double>(rng() % 900000) + 0.5 * static_cast<double>(rng() % 2)) *
                     std::pow(10.0, static_cast<int>(rng() % 30) - 20);
    ASSERT_EQ(general6(v), printf_text("%.6g", v)) << printf_text("%.17g", v);
  }
}

// The log formats under whatever rounding mode the calling thread set (fesetround): the fast
// path's rounding (an addition of 2^52) follows that mode, and must still give the digits of
// round-to-nearest, as std::to_chars (its fallback) does in every mode.
TEST(NumberText, General6RoundsToNearestUnderEveryRoundingMode) {
  std::vector<double> values = special_values();
  std::mt19937_64 rng(4);
  for (int i = 0; i < 100000; ++i)  // six digits and a fraction: every rounding direction matters
    values.push_back((100000 + static_cast<double>(rng() % 900000) + static_cast<double>(rng() % 1000) / 1000) *
                     std::pow(10.0, static_cast<int>(rng() % 30) - 20));
  std::vector<std::string> nearest;
  for (double v : values) nearest.push_back(general6(v));
  for (int mode : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    ASSERT_EQ(std::fesetround(mode), 0);
    std::size_t differing = 0;
    for (std::size_t i = 0; i < values.size(); ++i) differing += general6(values[i]) != nearest[i];
    std::fesetround(FE_TONEAREST);
    EXPECT_EQ(differing, 0u) << "rounding mode " << mode;
  }
}

TEST(NumberText, Fixed1IsPrintfs) {
  for (double v : special_values()) EXPECT_EQ(fixed1(v), printf_text("%.1f", v)) << printf_text("%.17g", v);
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> exponent(-3.0, 16.0), mantissa(-1.0, 1.0);
  for (int i = 0; i < 300000; ++i) {
    const double v = mantissa(rng) * std::pow(10.0, exponent(rng));
    ASSERT_EQ(fixed1(v), printf_text("%.1f", v)) << printf_text("%.17g", v);
  }
  for (int i = 0; i < 100000; ++i) {  // exact hundredths and twentieths: x.x5 ties and near-ties
    const double v = static_cast<double>(rng() % 10000000) / (i % 2 ? 100.0 : 20.0);
    ASSERT_EQ(fixed1(v), printf_text("%.1f", v)) << printf_text("%.17g", v);
  }
}

// write_exact_short is fmt's "{}" (the shortest text that reads back), for a float and for a
// double, wherever it writes; and it writes every multiple of 1/16 with up to seven significant
// digits (declining the others).
TEST(NumberText, ExactShortIsFmtsShortestWhereItApplies) {
  auto exact_short = [](double v, bool& written) {
    char buf[mate::log::detail::kExactShortMax];
    char* end = mate::log::detail::write_exact_short(v, buf);
    written = end != nullptr;
    return written ? std::string(buf, end) : std::string();
  };
  auto significant_digits = [](double v) {  // of the exact expansion (v a multiple of 1/16)
    std::string s = fmt::format("{:.4f}", std::fabs(v));
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    s.erase(std::remove(s.begin(), s.end(), '.'), s.end());
    s.erase(0, s.find_first_not_of('0'));
    return s.size();
  };
  std::size_t written_count = 0;
  auto check = [&](double v) {
    bool written = false;
    const std::string text = exact_short(v, written);
    const double sixteenths = v * 16;
    const bool expected = std::isfinite(v) && sixteenths == std::floor(sixteenths) && std::fabs(v) < 1e7 &&
                          significant_digits(v) <= 7;
    ASSERT_EQ(written, expected) << fmt::format("{}", v);
    if (!written) return;
    ++written_count;
    ASSERT_EQ(text, fmt::format("{}", v));
    if (static_cast<double>(static_cast<float>(v)) == v) {
      ASSERT_EQ(text, fmt::format("{}", static_cast<float>(v)));
    }
  };
  for (double v : {0.0, -0.0, 1.0, -1.0, 0.5, 0.0625, -0.0625, 12.375, 999.9375, 1000.0625, 9999.875, 10000.875,
                   99999.75, 100000.75, 999999.5, 1000000.5, 9999999.0, 1e7, -9999999.0, 16777216.0, 0.1, 1e-300,
                   std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::max(), 0x1p-1074})
    check(v);
  for (std::int64_t n = -200000; n <= 200000; ++n) check(static_cast<double>(n) / 16);  // every sixteenth near 0
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200000; ++i) {
    const double whole = static_cast<double>(rng() % 20000000) / static_cast<double>(1 << (rng() % 24));
    check(i % 2 ? whole : -whole);
    check(std::nextafter(whole, 0.0));
  }
  EXPECT_GT(written_count, 200000u);  // the domain was reached, not only declined
}

TEST(NumberText, AddressIsHexadecimalWithoutLeadingZeros) {
  auto address = [](std::uintptr_t a) {
    char buf[mate::log::detail::kAddressMax];
    std::memset(buf, '?', sizeof buf);  // every character shown must have been written
    return std::string(buf, mate::log::detail::write_address(a, buf));
  };
  auto expected = [](std::uintptr_t a) {
    char buf[32] = "0x";
    return std::string(buf, std::to_chars(buf + 2, buf + sizeof buf, a, 16).ptr);
  };
  EXPECT_EQ(address(0), "0x0");
  EXPECT_EQ(address(0xabc), "0xabc");
  EXPECT_EQ(address(UINTPTR_MAX), "0xffffffffffffffff");
  for (int bit = 0; bit < 64; ++bit) {
    const std::uintptr_t p = std::uintptr_t{1} << bit;
    for (std::uintptr_t a : {p, p - 1, p + 1, p | (p >> 1), ~p}) EXPECT_EQ(address(a), expected(a)) << bit;
  }
  std::mt19937_64 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const std::uintptr_t a = rng() >> (rng() % 64);
    ASSERT_EQ(address(a), expected(a));
  }
}

}  // namespace
