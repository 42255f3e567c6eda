// The records' clock: CLOCK_MONOTONIC readings, and the UTC time of a reading.
//
// A logged call at level 3 and above needs the time twice around its body (the elapsed wall
// time) and a UTC time for each of its two records. Reading CLOCK_REALTIME for the records as
// well took four clock reads a call (~35-45 ns each on the development VMs, most of it the TSC
// read itself); the outputs record's UTC time now comes from the body's end reading, three reads.
// UTC is derived as the monotonic reading plus the offset between the two clocks, which only a
// step of the system clock changes (settimeofday, clock_settime, a leap second, resuming from
// suspend): NTP's gradual adjustments slew both clocks alike. The offset is checked again at
// most 100 ms after the last check, so a record's time is CLOCK_REALTIME's to within a
// microsecond, except in the 100 ms after a step, when it may still be the time before the step
// (and when the offset could only be measured roughly, the thread descheduled between the
// readings: then it is measured again after 1 ms).
#pragma once

#include <time.h>

#include <cstdint>

namespace mate::log::detail {

// CLOCK_MONOTONIC now, in nanoseconds.
std::int64_t monotonic_ns() noexcept;

// The UTC time (CLOCK_REALTIME's) of the monotonic reading `mono_ns` taken just before.
timespec utc_at(std::int64_t mono_ns) noexcept;

// Tests: CLOCK_REALTIME as read by the next checks (nullptr: the system's), and the offset
// checked again at the next utc_at (as 100 ms after the last check would).
void set_realtime_clock_for_testing(int (*read)(clockid_t, timespec*)) noexcept;
void check_offset_next_for_testing() noexcept;

}  // namespace mate::log::detail
