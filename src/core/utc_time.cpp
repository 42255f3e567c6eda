// UTC timestamps in ISO 8601; see include/mate/core/utc_time.hpp for the contract.
#include "mate/core/utc_time.hpp"

namespace mate::core {

std::string utc_iso8601(std::time_t when) {
  std::tm tm{};
  gmtime_r(&when, &tm);
  char buf[32];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf, n);
}

std::string utc_now_iso8601() { return utc_iso8601(std::time(nullptr)); }

}  // namespace mate::core
