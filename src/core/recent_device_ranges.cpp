// A fixed ring under a mutex: written from the log's call path, read when a fault is reported.
#include "mate/core/recent_device_ranges.hpp"

#include <mutex>

namespace mate::core {

namespace {

std::mutex g_mutex;
RecentDeviceRange g_ring[kRecentDeviceRanges];
std::size_t g_count = 0;  // ranges ever recorded; the newest is at (g_count - 1) % kRecentDeviceRanges

}  // namespace

void note_device_range(const char* call, std::uint64_t seq, std::uintptr_t lo, std::uintptr_t hi) noexcept {
  if (hi <= lo) return;
  std::lock_guard lock(g_mutex);
  RecentDeviceRange& r = g_ring[g_count % kRecentDeviceRanges];
  std::size_t n = 0;
  for (; call != nullptr && call[n] != '\0' && n + 1 < sizeof(r.call); ++n) r.call[n] = call[n];
  r.call[n] = '\0';
  r.seq = seq;
  r.lo = lo;
  r.hi = hi;
  ++g_count;
}

void clear_recent_device_ranges() noexcept {
  std::lock_guard lock(g_mutex);
  g_count = 0;
}

std::size_t recent_device_ranges(RecentDeviceRange (&out)[kRecentDeviceRanges]) noexcept {
  std::lock_guard lock(g_mutex);
  const std::size_t n = g_count < kRecentDeviceRanges ? g_count : kRecentDeviceRanges;
  for (std::size_t i = 0; i < n; ++i) out[i] = g_ring[(g_count - 1 - i) % kRecentDeviceRanges];
  return n;
}

}  // namespace mate::core
