// mate/core/utc_time.hpp — the wall-clock time as text, for records other tools and people read
// (a lock file's holder, a module manifest's built_at, log records, dump metadata and names).
//
// Contract: ISO 8601 in UTC, "2026-11-22T10:08:54Z" (always 20 characters) or with
// microseconds "2026-11-22T10:08:54.123456Z" (27), so that such timestamps sort as text in time
// order and compare across hosts and time zones; the file-name form "20261122_100854_123"
// (milliseconds) sorts the same way.
#pragma once

#include <cstddef>
#include <ctime>
#include <string>

namespace mate::core {

// `when` as "YYYY-MM-DDTHH:MM:SSZ" in UTC.
std::string utc_iso8601(std::time_t when);

// The current time, as utc_iso8601 writes it.
std::string utc_now_iso8601();

// `when` as "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" in UTC (log records, dump metadata).
std::string utc_iso8601_micros(const timespec& when);
// The same text written to `out` (room for kUtcMicrosMax characters; 27 for years 0 to 9999),
// without allocating: log records ask for it on every call. Returns the length.
inline constexpr std::size_t kUtcMicrosMax = 64;
std::size_t write_utc_iso8601_micros(const timespec& when, char* out) noexcept;
std::string utc_now_iso8601_micros();

// The current time as "YYYYmmdd_HHMMSS_mmm" in UTC (dump directory names).
std::string utc_now_for_file_name();

}  // namespace mate::core
