// The records' clock (src/log/wall_clock.hpp): UTC derived from CLOCK_MONOTONIC readings is
// CLOCK_REALTIME's time, and follows a step of the system clock at the next check.
#include <gtest/gtest.h>
#include <time.h>

#include <cstdint>

#include "log/wall_clock.hpp"

namespace {

using mate::log::detail::check_offset_next_for_testing;
using mate::log::detail::monotonic_ns;
using mate::log::detail::set_realtime_clock_for_testing;
using mate::log::detail::utc_at;

std::int64_t ns_of(const timespec& t) { return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }

std::int64_t realtime_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return ns_of(t);
}

// The system's real-time clock an hour ahead: a step, as settimeofday would make.
int an_hour_ahead(clockid_t clock, timespec* t) {
  const int r = ::clock_gettime(clock, t);
  t->tv_sec += 3600;
  return r;
}

// utc_at(now) lies between CLOCK_REALTIME read just before and just after (within the offset's
// measurement error, microseconds at most; 1 ms allows for a descheduled test).
void expect_utc_is_realtime(std::int64_t ahead_ns) {
  const std::int64_t before = realtime_ns();
  const timespec utc = utc_at(monotonic_ns());
  const std::int64_t after = realtime_ns();
  EXPECT_GE(utc.tv_nsec, 0);
  EXPECT_LT(utc.tv_nsec, 1'000'000'000);
  EXPECT_GE(ns_of(utc), before + ahead_ns - 1'000'000);
  EXPECT_LE(ns_of(utc), after + ahead_ns + 1'000'000);
}

TEST(WallClock, UtcOfAMonotonicReadingIsTheRealtimeClocks) {
  for (int i = 0; i < 1000; ++i) expect_utc_is_realtime(0);
  // Readings in order give times in order.
  std::int64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::int64_t t = ns_of(utc_at(monotonic_ns()));
    EXPECT_GE(t, last);
    last = t;
  }
}

TEST(WallClock, AStepOfTheSystemClockShowsAtTheNextCheck) {
  expect_utc_is_realtime(0);
  set_realtime_clock_for_testing(an_hour_ahead);
  check_offset_next_for_testing();
  expect_utc_is_realtime(3600'000'000'000);
  set_realtime_clock_for_testing(nullptr);
  check_offset_next_for_testing();
  expect_utc_is_realtime(0);
}

}  // namespace
