// The allocator's metadata: a fixed-capacity array of live slots, a user-pointer hash index and
// the quarantine's records, all in mmap'd memory (never malloc: the allocator serves malloc
// itself).
//
// Invariants (under `mutex`):
//  * a slot is Free (on the free list) or in use: Live, or Quarantined while its free is in
//    progress (unmapping, canary check) before quarantine_push moves it into the quarantine;
//  * the index holds every slot in use and every quarantined record, by user pointer;
//  * `high_water` bounds the slots ever used, so the fault handler scans [0, high_water)
//    without the lock (it reads racy but never dangling memory: slots are never unmapped while
//    the table is registered).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "mate/guard/allocator.hpp"
#include "guard/canary.hpp"
#include "guard/quarantine.hpp"
#include "guard/slot.hpp"
#include "guard/stack/stack_depot.hpp"

namespace mate::guard {

class SlotTable {
 public:
  // Throws GuardError when the tables cannot be mapped. `granularity`: the backend's.
  SlotTable(std::size_t capacity, std::size_t granularity);
  ~SlotTable();
  SlotTable(const SlotTable&) = delete;
  SlotTable& operator=(const SlotTable&) = delete;

  // Under `mutex`:
  std::uint32_t take_free() noexcept;  // kNoSlot when full
  void put_free(std::uint32_t index) noexcept;
  // Indexes slot `index` by its `user` pointer (set before the call). False when the index
  // cannot grow (no memory for a bigger table).
  bool index_insert(std::uint32_t index) noexcept;
  // The slot in use holding `user`, kNoSlot when none (quarantined records have no slot).
  std::uint32_t index_find(std::uintptr_t user) const noexcept;
  // True when `user` is a slot's or a quarantined record's.
  bool index_contains(std::uintptr_t user) const noexcept { return find_entry(user) != kNoEntry; }
  // The quarantined record of `user`, read into `out`; false when there is none.
  bool find_quarantined(std::uintptr_t user, Slot* out) const noexcept;
  void index_erase(std::uintptr_t user) noexcept;
  // Moves slot `index` (freed, unmapped) into the quarantine and frees the slot (kKept). When no
  // record can describe it (kNotEncodable, quarantine.hpp) the slot is freed and unindexed all
  // the same, and the caller releases the reservation at once. kNoRoom changes nothing: the
  // caller evicts the oldest and tries again, or gives up with drop().
  Quarantine::Push quarantine_push(std::uint32_t index) noexcept;
  // Frees and unindexes slot `index` without quarantining it.
  void drop(std::uint32_t index) noexcept;
  // The oldest quarantined record, removed from the quarantine and the index; false when empty.
  bool quarantine_pop(Slot* out) noexcept;
  std::size_t quarantined() const noexcept { return quarantine_.size(); }
  const Quarantine& quarantine() const noexcept { return quarantine_; }

  Slot& slot(std::uint32_t index) noexcept { return slots_[index]; }
  const Slot& slot(std::uint32_t index) const noexcept { return slots_[index]; }
  std::uint32_t high_water() const noexcept { return high_water_.load(std::memory_order_acquire); }

  mutable std::mutex mutex;
  StackDepot depot{kDepotStacks};  // put() under `mutex`
  static constexpr std::uint32_t kDepotStacks = StackDepot::kMaxCapacity;
  Stats stats{};
  std::uint64_t next_id = 1;
  std::atomic<bool> refusal_said{false};
  std::atomic<bool> low_priority_refusal_said{false};  // say_low_priority_share_used()
  // Bounds of every reservation ever made, for GuardAllocator::may_hold().
  std::atomic<std::uintptr_t> lowest{UINTPTR_MAX};
  std::atomic<std::uintptr_t> highest{0};
  // Host staging buffer for device canary copies (guarded by scratch_mutex): the read-back at
  // free (a small buffer's canary fills the rest of its 2 MiB granule), short canaries, and the
  // pattern image's one fill. Page-locked by a device allocator (scratch_pinned) so that these
  // run at the bus's speed; untouched (no resident memory) in a host allocator.
  std::mutex scratch_mutex;
  unsigned char* scratch = nullptr;
  bool scratch_pinned = false;
  static constexpr std::size_t kScratchBytes = std::size_t{1} << 20;
  // A device allocator's copy of the canary pattern in device memory (made at its first
  // allocation, under scratch_mutex): a canary is then written by device-side copies from it,
  // and no longer crosses the bus. Zero bytes: not made (yet; pattern_image_attempts so far).
  PatternImage pattern_image;
  int pattern_image_attempts = 0;

 private:
  void grow_index() noexcept;
  // Index entries: slot + 1 for a slot, kQuarantineTag | the low bits of its sequence number
  // for a quarantined record, 0 for an empty bucket.
  static constexpr std::uint32_t kQuarantineTag = 0x80000000u;
  static constexpr std::size_t kNoEntry = ~std::size_t{0};
  std::size_t find_entry(std::uintptr_t user) const noexcept;  // bucket, or kNoEntry
  std::uintptr_t user_of_entry(std::uint32_t entry) const noexcept;
  std::uintptr_t key(std::size_t i) const noexcept { return user_of_entry(entries_[i]); }
  void insert_entry(std::uint32_t entry) noexcept;  // room checked by the caller

  std::size_t capacity_;
  std::size_t index_capacity_;  // power of two; grows (mmap + rehash) to stay at most 3/4 full
  std::size_t index_used_ = 0;
  Slot* slots_;
  // Open addressing with linear probing; the key is the slot's or record's user pointer. No key
  // array: 4 bytes an entry instead of 12, and the index holds every quarantined allocation too
  // (double frees are found through it).
  std::uint32_t* entries_;
  std::uint32_t free_head_ = kNoSlot;
  std::atomic<std::uint32_t> high_water_{0};
  Quarantine quarantine_;
};

// Allocators the fault handler searches (at most kMaxAllocators at once).
inline constexpr int kMaxAllocators = 16;
void register_allocator(GuardAllocator* allocator, SlotTable* table) noexcept;
void unregister_allocator(GuardAllocator* allocator) noexcept;
struct Registered {
  GuardAllocator* allocator;
  SlotTable* table;
};
// Copies the registered allocators into `out`; returns how many (async-signal-safe).
int registered_allocators(Registered* out, int cap) noexcept;

}  // namespace mate::guard
