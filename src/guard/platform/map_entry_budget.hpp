// The guard's budget of the process's memory-map entries (GuardAllocatorConfig::map_entry_limit,
// the unit of vm.max_map_count): upper estimates kept as allocations come and go, and a count of
// /proc/self/maps (map_entries.hpp) only when they would pass the limit. Host platform code; a
// GuardAllocator has one only when its config sets a limit.
#pragma once

#include <atomic>
#include <cstddef>

#include "guard/slot_table.hpp"

namespace mate::guard {

class MapEntryBudget {
 public:
  // Gives the owner's oldest quarantined range back (under the table's mutex; it then calls
  // note_range_released_locked()); false when the quarantine is empty.
  using EvictOldest = bool (*)(void* owner) noexcept;

  // Counts the process's entries now; a count that fails (no descriptor free) leaves the
  // estimate at the limit, so the first check counts again, or refuses.
  explicit MapEntryBudget(std::size_t limit) noexcept;
  std::size_t limit() const noexcept { return limit_; }

  // True when one more allocation keeps the process's entries within the limit (takes
  // table.mutex; may evict quarantined ranges through `evict`). The allocation then counts as in
  // flight until end_allocation().
  bool admit(SlotTable& table, EvictOldest evict, void* owner) noexcept;
  // The admitted allocation's mappings are made or given up: a count sees them from now on.
  void end_allocation() noexcept { in_flight_.fetch_sub(1, std::memory_order_release); }

  // Under table.mutex:
  void note_allocated_locked(bool mapped_nothing) noexcept {
    if (mapped_nothing) live_unmapped_ += 1;
  }
  void note_freed_locked(bool mapped_nothing) noexcept {
    frees_since_refusal_ += 1;
    if (mapped_nothing) live_unmapped_ -= 1;
  }
  // A reservation given back: a hole in a range of inaccessible pages can split its entry.
  void note_range_released_locked() noexcept { entries_since_count_ += 1; }

 private:
  bool fits(const SlotTable& table) const noexcept;
  bool recount(const SlotTable& table) noexcept;

  const std::size_t limit_;
  // The process's entries at the last count, and an upper bound of those added since.
  std::size_t counted_ = 0;
  std::size_t entries_since_count_ = 0;
  // The entries not the guard's at the last count (the count less the live allocations' own
  // read-write mappings), and the allocations since that count.
  std::size_t base_ = 0;
  std::size_t allocations_since_count_ = 0;
  std::size_t live_unmapped_ = 0;  // zero-byte live allocations: no read-write mapping of their own
  // Whether the last check refused, and the frees since (which may make room).
  bool refused_ = false;
  std::size_t frees_since_refusal_ = 0;
  // Allocations past the check whose mappings a count may not see yet (updated without the lock).
  std::atomic<std::size_t> in_flight_{0};
};

}  // namespace mate::guard
