// UTC timestamps in ISO 8601; see include/mate/core/utc_time.hpp for the contract.
#include "mate/core/utc_time.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "mate/core/digit_pairs.hpp"
#include "mate/core/initial_exec_tls.hpp"

namespace mate::core {

namespace {
timespec now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
}
std::size_t write_slow(const timespec& when, char* out) noexcept {
  std::tm t{};
  gmtime_r(&when.tv_sec, &t);
  const int n = std::snprintf(out, kUtcMicrosMax, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", t.tm_year + 1900,
                              t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, when.tv_nsec / 1000);
  return n < 0 ? 0 : std::min(static_cast<std::size_t>(n), kUtcMicrosMax - 1);
}
}  // namespace

std::string utc_iso8601(std::time_t when) {
  std::tm tm{};
  gmtime_r(&when, &tm);
  char buf[32];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf, n);
}

std::string utc_now_iso8601() { return utc_iso8601(std::time(nullptr)); }

// Log records ask many times a second: the date and time to the second are formatted once per
// second per thread, the microseconds written by hand.
std::size_t write_utc_iso8601_micros(const timespec& when, char* out) noexcept {
  MATE_INITIAL_EXEC thread_local std::time_t cached_second = -1;
  MATE_INITIAL_EXEC thread_local char cached[20];  // "YYYY-MM-DDTHH:MM:SS"
  if (when.tv_sec != cached_second) {
    std::tm t{};
    gmtime_r(&when.tv_sec, &t);
    char buf[64];
    const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", t.tm_year + 1900, t.tm_mon + 1,
                                t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec);
    if (n != 19) return write_slow(when, out);  // a year past 9999 or before 0
    std::memcpy(cached, buf, 19);
    cached_second = when.tv_sec;
  }
  std::memcpy(out, cached, 19);
  out[19] = '.';
  // Six digits as three independent pairs, each a table lookup (one digit per division by ten
  // chains six divisions).
  unsigned micros;
  if (when.tv_nsec >= 0 && when.tv_nsec < 1'000'000'000) {
    micros = static_cast<unsigned>(when.tv_nsec) / 1000;
  } else {  // not normalized: still six digits (each pair below 100)
    long us = when.tv_nsec / 1000 % 1000000;
    micros = static_cast<unsigned>(us < 0 ? us + 1000000 : us);
  }
  write_two_digits(out + 20, micros / 10000);
  write_two_digits(out + 22, micros / 100 % 100);
  write_two_digits(out + 24, micros % 100);
  out[26] = 'Z';
  return 27;
}

std::string utc_iso8601_micros(const timespec& when) {
  char out[kUtcMicrosMax];
  return std::string(out, write_utc_iso8601_micros(when, out));
}

std::string utc_now_iso8601_micros() { return utc_iso8601_micros(now()); }

std::string utc_now_for_file_name() {
  const timespec ts = now();
  std::tm t{};
  gmtime_r(&ts.tv_sec, &t);
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, "%04d%02d%02d_%02d%02d%02d_%03d", t.tm_year + 1900, t.tm_mon + 1,
                              t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<int>(ts.tv_nsec / 1000000));
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace mate::core
