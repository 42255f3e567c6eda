// The guard's budget of memory-map entries: when to count /proc/self/maps, and when to give
// quarantined ranges back or refuse an allocation (see map_entry_budget.hpp).
#include "guard/platform/map_entry_budget.hpp"

#include <mutex>

#include "guard/platform/map_entries.hpp"

namespace mate::guard {

MapEntryBudget::MapEntryBudget(std::size_t limit) noexcept : limit_(limit) {
  // Uncounted (no descriptor free): the first check counts, or refuses.
  if (!count_map_entries(&counted_)) counted_ = limit;
  base_ = counted_;
}

// Room for one more allocation's entries (a reservation and the mapping in it split one
// inaccessible range into three at most) under either upper estimate: the last count plus 3 an
// allocation since; or the entries not the guard's at the last count plus 3 a live allocation
// and 1 a quarantined range (what its reservations can split into). The first grows with every
// allocation, freed or not; the second lets a program that frees as it goes run without counts,
// but misses the program's own mappings since the count, so it is trusted only for 8/3 x the
// limit allocations after it (then the first, long past the limit, forces a count).
bool MapEntryBudget::fits(const SlotTable& table) const noexcept {
  const std::size_t since_count = counted_ + entries_since_count_;
  std::size_t estimate = since_count;
  const std::size_t stale_after = 8 * (limit_ / 3);
  if (allocations_since_count_ < stale_after) {
    const std::size_t live = table.stats.live + in_flight_.load(std::memory_order_acquire);
    const std::size_t by_allocation = base_ + 3 * live + table.quarantined();
    if (by_allocation < estimate) estimate = by_allocation;
  }
  return estimate + 3 <= limit_;
}

// Counts the process's entries (under table.mutex); false when the count fails, leaving the
// estimate, an upper bound, as it was.
bool MapEntryBudget::recount(const SlotTable& table) noexcept {
  std::size_t n = 0;
  if (!count_map_entries(&n)) return false;
  counted_ = n;
  // Allocations between their check and their mapping may be missing from the count.
  entries_since_count_ = 3 * in_flight_.load(std::memory_order_acquire);
  // Each live allocation with bytes has a read-write mapping of its own, between guards.
  const std::size_t own = table.stats.live - live_unmapped_;
  base_ = n > own ? n - own : 0;
  allocations_since_count_ = 0;
  return true;
}

// The estimate is counted again when it would pass the limit: after a count it runs 3 an
// allocation above the real figure, so counts come once per (limit - entries) / 3 allocations,
// and allocations stop while room for kMinRoomAllocations is left rather than count every few.
// After a refusal nothing is counted again until that many frees may have made room. The
// program's own new mappings come out of the limit's margin.
bool MapEntryBudget::admit(SlotTable& table, EvictOldest evict, void* owner) noexcept {
  constexpr std::size_t kMinRoomAllocations = 256;
  std::lock_guard lock(table.mutex);
  if (refused_ || !fits(table)) {
    if (refused_ && frees_since_refusal_ < kMinRoomAllocations) return false;
    const auto room = [&] { return counted_ + entries_since_count_ + 3 * kMinRoomAllocations <= limit_; };
    bool counted = recount(table);
    // A quarantined range frees an entry when given back only where it does not share one with
    // its neighbours' guard pages (a hole can even split one): half of them at a time, while a
    // count shows it helped.
    while (counted && !room() && table.quarantined() > 0) {
      const std::size_t before = counted_;
      for (std::size_t n = (table.quarantined() + 1) / 2; n > 0 && evict(owner); --n) {
      }
      counted = recount(table);
      if (counted && counted_ >= before) break;
    }
    if (!counted || !room()) {
      refused_ = true;
      frees_since_refusal_ = 0;
      return false;
    }
    refused_ = false;
  }
  entries_since_count_ += 3;
  allocations_since_count_ += 1;
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace mate::guard
