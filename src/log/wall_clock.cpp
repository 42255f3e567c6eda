// UTC times of monotonic readings (see wall_clock.hpp).
#include "wall_clock.hpp"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <mutex>

namespace mate::log::detail {

namespace {

constexpr std::int64_t kNsPerSecond = 1'000'000'000;
constexpr std::int64_t kRecheckNs = 100'000'000;     // 100 ms
constexpr std::int64_t kWideNs = 20'000;              // a measurement's window beyond which
constexpr std::int64_t kRecheckWideNs = 1'000'000;    // it is taken again after 1 ms
// Offsets that differ by less than this are the same offset measured twice: keeping the old
// one keeps the records' times in the order of the monotonic readings.
constexpr std::int64_t kStepNs = 1'000;

std::int64_t ns_of(const timespec& t) noexcept { return static_cast<std::int64_t>(t.tv_sec) * kNsPerSecond + t.tv_nsec; }

// CLOCK_REALTIME minus CLOCK_MONOTONIC, and the monotonic time until which it needs no check.
std::atomic<std::int64_t> g_offset_ns{0};
std::atomic<std::int64_t> g_checked_until_ns{INT64_MIN};
std::atomic<int (*)(clockid_t, timespec*)> g_realtime{nullptr};  // tests' stand-in

// Measures the offset between two monotonic readings around one real-time reading (its error
// is at most half their distance: tens of nanoseconds, unless the thread was descheduled in
// between, so the narrowest of three tries counts; a wide one is measured again after 1 ms) and
// keeps it if it moved by a step. One thread measures at a time, so that one descheduled in the
// middle cannot put back an offset older than another's; others meanwhile go on with the offset
// there is (the very first measurement excepted: they wait for it). Cold: its frame (a lock, the
// readings) stays off utc_at's path, taken once per 100 ms.
[[gnu::cold, gnu::noinline]] void check_offset(std::int64_t mono_ns) noexcept {
  static std::mutex checking;
  const bool first = g_checked_until_ns.load(std::memory_order_acquire) == INT64_MIN;
  if (first) {
    checking.lock();
  } else if (!checking.try_lock()) {
    return;
  }
  const std::lock_guard unlock(checking, std::adopt_lock);
  const std::int64_t checked_until = g_checked_until_ns.load(std::memory_order_acquire);
  if (mono_ns < checked_until && checked_until != INT64_MIN) return;  // another thread just did
  auto* const read_realtime = g_realtime.load(std::memory_order_relaxed);
  std::int64_t measured = 0, window = INT64_MAX, after_ns = 0;
  for (int attempt = 0; attempt < 3 && window > 2 * kStepNs; ++attempt) {
    timespec before{}, real{}, after{};
    ::clock_gettime(CLOCK_MONOTONIC, &before);
    if (read_realtime != nullptr) {
      read_realtime(CLOCK_REALTIME, &real);
    } else {
      ::clock_gettime(CLOCK_REALTIME, &real);
    }
    ::clock_gettime(CLOCK_MONOTONIC, &after);
    if (ns_of(after) - ns_of(before) < window) {
      window = ns_of(after) - ns_of(before);
      measured = ns_of(real) - (ns_of(before) + window / 2);
    }
    after_ns = ns_of(after);
  }
  if (checked_until == INT64_MIN || std::llabs(measured - g_offset_ns.load(std::memory_order_relaxed)) > kStepNs + window / 2)
    g_offset_ns.store(measured, std::memory_order_relaxed);
  g_checked_until_ns.store(after_ns + (window > kWideNs ? kRecheckWideNs : kRecheckNs), std::memory_order_release);
}

}  // namespace

std::int64_t monotonic_ns() noexcept {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return ns_of(t);
}

timespec utc_at(std::int64_t mono_ns) noexcept {
  if (mono_ns >= g_checked_until_ns.load(std::memory_order_acquire)) check_offset(mono_ns);
  const std::int64_t utc = mono_ns + g_offset_ns.load(std::memory_order_relaxed);
  std::int64_t seconds = utc / kNsPerSecond, ns = utc % kNsPerSecond;
  if (ns < 0) {  // before 1970: tv_nsec stays in [0, 1e9)
    ns += kNsPerSecond;
    --seconds;
  }
  timespec t{};
  t.tv_sec = static_cast<time_t>(seconds);
  t.tv_nsec = static_cast<long>(ns);
  return t;
}

void set_realtime_clock_for_testing(int (*read)(clockid_t, timespec*)) noexcept {
  g_realtime.store(read, std::memory_order_relaxed);
}

void check_offset_next_for_testing() noexcept { g_checked_until_ns.store(INT64_MIN + 1, std::memory_order_release); }

}  // namespace mate::log::detail
