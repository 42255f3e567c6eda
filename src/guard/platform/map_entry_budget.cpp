// The guard's budget of memory-map entries: when to count /proc/self/maps, and when to give
// quarantined ranges back or refuse an allocation (see map_entry_budget.hpp).
#include "guard/platform/map_entry_budget.hpp"

#include <time.h>

#include <mutex>

#include "guard/platform/map_entries.hpp"

namespace mate::guard {

namespace {

std::int64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

MapEntryBudget::MapEntryBudget(std::size_t limit, std::size_t low_limit) noexcept
    : limit_(limit), low_limit_(low_limit == 0 || low_limit > limit ? limit : low_limit) {
  // Uncounted (no descriptor free): the first check counts, or refuses.
  if (!count_map_entries(&counted_)) counted_ = limit;
  base_ = counted_;
}

// Room for one more allocation's entries under `limit` (a reservation and the mapping in it
// split one inaccessible range into three at most) under either upper estimate: the last count
// plus 3 an allocation since; or the entries not the guard's at the last count plus 3 a live
// allocation and 1 a quarantined range (what its reservations can split into). The first grows
// with every allocation, freed or not; the second lets a program that frees as it goes run
// without counts, but misses the program's own mappings since the count, so it is trusted only
// for 8/3 x the limit allocations after it (then the first, long past the limit, forces a count).
bool MapEntryBudget::fits(const SlotTable& table, std::size_t limit) const noexcept {
  const std::size_t since_count = counted_ + entries_since_count_;
  std::size_t estimate = since_count;
  const std::size_t stale_after = 8 * (limit_ / 3);
  if (allocations_since_count_ < stale_after) {
    const std::size_t live = table.stats.live + in_flight_.load(std::memory_order_acquire);
    const std::size_t by_allocation = base_ + 3 * live + table.quarantined();
    if (by_allocation < estimate) estimate = by_allocation;
  }
  return estimate + 3 <= limit;
}

// Counts the process's entries (under table.mutex); false when the count fails, leaving the
// estimate, an upper bound, as it was.
bool MapEntryBudget::recount(const SlotTable& table) noexcept {
  const std::int64_t start = now_ns();
  std::size_t n = 0;
  const bool counted = count_map_entries(&n);
  last_count_end_ns_ = now_ns();
  last_count_cost_ns_ = last_count_end_ns_ - start;
  if (!counted) return false;
  counted_ = n;
  // Allocations between their check and their mapping may be missing from the count.
  entries_since_count_ = 3 * in_flight_.load(std::memory_order_acquire);
  // Each live allocation with bytes has a read-write mapping of its own, between guards.
  const std::size_t own = table.stats.live - live_unmapped_;
  base_ = n > own ? n - own : 0;
  allocations_since_count_ = 0;
  return true;
}

// After a refusal a class counts again only once enough of its frees may have made room, and
// no sooner than 16 counts' time after the last (unless 512 were freed): a program that keeps
// allocating while entries are short (an interpreter's small blocks, by the million) must not
// spend its run counting.
bool MapEntryBudget::may_count_again(const Refusal& r) const noexcept {
  constexpr std::size_t kMinFrees = 256;
  if (r.frees_since < kMinFrees) return false;
  return r.frees_since >= 2 * kMinFrees || now_ns() - last_count_end_ns_ >= 16 * last_count_cost_ns_;
}

// The estimate is counted again when it would pass the class's limit: after a count it runs 3 an
// allocation above the real figure, so counts come once per (limit - entries) / 3 allocations,
// and allocations stop while room for kMinRoomAllocations is left rather than count every few.
// The program's own new mappings come out of the margin above `limit_` (the reserve).
bool MapEntryBudget::admit(SlotTable& table, bool low_priority, EvictOldest evict, void* owner) noexcept {
  constexpr std::size_t kMinRoomAllocations = 256;
  std::lock_guard lock(table.mutex);
  const std::size_t limit = low_priority ? low_limit_ : limit_;
  Refusal& refusal = refusal_[low_priority ? 1 : 0];
  // After a refusal the estimate may fit again within the room a count asked for: that room
  // is kept until a count shows it (may_count_again).
  if (refusal.refused || !fits(table, limit)) {
    if (refusal.refused && !may_count_again(refusal)) return false;
    const auto room = [&] { return counted_ + entries_since_count_ + 3 * kMinRoomAllocations <= limit; };
    bool counted = recount(table);
    // A quarantined range frees an entry when given back only where it does not share one with
    // its neighbours' guard pages (a hole can even split one): half of them at a time, while a
    // count shows it helped. Small blocks never take the quarantine's entries: it keeps freed
    // tensors faulting.
    while (!low_priority && counted && !room() && table.quarantined() > 0) {
      const std::size_t before = counted_;
      for (std::size_t n = (table.quarantined() + 1) / 2; n > 0 && evict(owner); --n) {
      }
      counted = recount(table);
      if (counted && counted_ >= before) break;
    }
    if (!counted || !room()) {
      refusal.refused = true;
      refusal.frees_since = 0;
      return false;
    }
  }
  refusal.refused = false;
  entries_since_count_ += 3;
  allocations_since_count_ += 1;
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace mate::guard
