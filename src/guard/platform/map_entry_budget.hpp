// The guard's budget of the process's memory-map entries (GuardAllocatorConfig::map_entry_limit,
// the unit of vm.max_map_count): upper estimates kept as allocations come and go, and a count of
// /proc/self/maps (map_entries.hpp) only when they would pass the limit. Host platform code; a
// GuardAllocator has one only when its config sets a limit.
//
// Two limits: low-priority allocations (an interpreter's small blocks) are admitted while the
// estimate stays under low_limit, the others (tensors, aligned and large blocks) under limit.
// So once small blocks have used their share, the rest of the entries still go to the
// allocations most worth guarding. Each class remembers its own refusal.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "guard/slot_table.hpp"

namespace mate::guard {

class MapEntryBudget {
 public:
  // Gives the owner's oldest quarantined range back (under the table's mutex; it then calls
  // note_range_released_locked()); false when the quarantine is empty.
  using EvictOldest = bool (*)(void* owner) noexcept;

  // Counts the process's entries now; a count that fails (no descriptor free) leaves the
  // estimate at the limit, so the first check counts again, or refuses. `low_limit` 0 or above
  // `limit`: the same as `limit`.
  MapEntryBudget(std::size_t limit, std::size_t low_limit) noexcept;
  std::size_t limit() const noexcept { return limit_; }
  std::size_t low_limit() const noexcept { return low_limit_; }
  // The process's entries at the last count.
  std::size_t last_count() const noexcept { return counted_; }

  // True when one more allocation keeps the process's entries within the limit of its class
  // (takes table.mutex). A normal allocation may evict quarantined ranges through `evict`; a
  // low-priority one never does (the quarantine keeps freed tensors faulting). The allocation
  // then counts as in flight until end_allocation().
  bool admit(SlotTable& table, bool low_priority, EvictOldest evict, void* owner) noexcept;
  // The admitted allocation's mappings are made or given up: a count sees them from now on.
  void end_allocation() noexcept { in_flight_.fetch_sub(1, std::memory_order_release); }

  // Under table.mutex:
  void note_allocated_locked(bool mapped_nothing) noexcept {
    if (mapped_nothing) live_unmapped_ += 1;
  }
  void note_freed_locked(bool mapped_nothing) noexcept {
    refusal_[0].frees_since += 1;
    refusal_[1].frees_since += 1;
    if (mapped_nothing) live_unmapped_ -= 1;
  }
  // A reservation given back: a hole in a range of inaccessible pages can split its entry.
  void note_range_released_locked() noexcept { entries_since_count_ += 1; }

 private:
  // Whether a class's last check refused, the frees since (which may make room), and when.
  struct Refusal {
    bool refused = false;
    std::size_t frees_since = 0;
  };
  bool fits(const SlotTable& table, std::size_t limit) const noexcept;
  bool recount(const SlotTable& table) noexcept;
  bool may_count_again(const Refusal& r) const noexcept;

  const std::size_t limit_;
  const std::size_t low_limit_;
  // The process's entries at the last count, and an upper bound of those added since.
  std::size_t counted_ = 0;
  std::size_t entries_since_count_ = 0;
  // The entries not the guard's at the last count (the count less the live allocations' own
  // read-write mappings), and the allocations since that count.
  std::size_t base_ = 0;
  std::size_t allocations_since_count_ = 0;
  std::size_t live_unmapped_ = 0;  // zero-byte live allocations: no read-write mapping of their own
  Refusal refusal_[2];             // [0] normal, [1] low priority
  // When the last count ended and what it cost (CLOCK_MONOTONIC, ns): after a refusal the
  // next count waits 16 times that, so counting takes at most ~6% of the run.
  std::int64_t last_count_end_ns_ = 0;
  std::int64_t last_count_cost_ns_ = 0;
  // Allocations past the check whose mappings a count may not see yet (updated without the lock).
  std::atomic<std::size_t> in_flight_{0};
};

}  // namespace mate::guard
