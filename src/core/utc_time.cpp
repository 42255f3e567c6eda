// UTC timestamps in ISO 8601; see include/mate/core/utc_time.hpp for the contract.
#include "mate/core/utc_time.hpp"

#include <cstdio>

namespace mate::core {

namespace {
timespec now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
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

std::string utc_iso8601_micros(const timespec& when) {
  std::tm t{};
  gmtime_r(&when.tv_sec, &t);
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", t.tm_year + 1900, t.tm_mon + 1,
                              t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, when.tv_nsec / 1000);
  return std::string(buf, static_cast<std::size_t>(n));
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
