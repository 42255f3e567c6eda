// mate/core/utc_time.hpp — the wall-clock time as text, for records other tools and people read
// (a lock file's holder, a module manifest's built_at).
//
// Contract: ISO 8601 in UTC to the second, "2026-11-22T10:08:54Z" (always 20 characters), so
// that such timestamps sort as text in time order and compare across hosts and time zones.
#pragma once

#include <ctime>
#include <string>

namespace mate::core {

// `when` as "YYYY-MM-DDTHH:MM:SSZ" in UTC.
std::string utc_iso8601(std::time_t when);

// The current time, as utc_iso8601 writes it.
std::string utc_now_iso8601();

}  // namespace mate::core
