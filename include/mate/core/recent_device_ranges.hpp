// mate/core/recent_device_ranges.hpp — the device memory ranges recent API calls passed, kept so
// that a device fault can be related to the allocations near them.
//
// A device fault is not a host signal: the driver reports CUDA_ERROR_ILLEGAL_ADDRESS (700; the
// MUSA driver uses the same code) at the next synchronization and gives no address. The API log
// (level >= 3, src/log) records here the address range of every non-CPU tensor argument; the
// guarded allocator's device-fault report (mate/guard/device_fault_report.hpp) reads them back and
// names the allocation nearest to each. Both sides depend on core, neither on the other.
//
// Contract: bounded (the newest kRecentDeviceRanges ranges win), thread-safe, never allocates.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mate::core {

inline constexpr std::size_t kRecentDeviceRanges = 32;

struct RecentDeviceRange {
  char call[48];  // the API function's name, truncated to 47 characters
  std::uint64_t seq;  // the log's sequence number of the call
  std::uintptr_t lo;
  std::uintptr_t hi;
};

// Records [lo, hi) as a device range passed to call `call` with log sequence number `seq`.
// Empty ranges are ignored.
void note_device_range(const char* call, std::uint64_t seq, std::uintptr_t lo, std::uintptr_t hi) noexcept;
// Forgets every recorded range (tests).
void clear_recent_device_ranges() noexcept;
// Copies the recorded ranges, newest first, into `out` (room for kRecentDeviceRanges); returns
// how many were copied.
std::size_t recent_device_ranges(RecentDeviceRange (&out)[kRecentDeviceRanges]) noexcept;

}  // namespace mate::core
