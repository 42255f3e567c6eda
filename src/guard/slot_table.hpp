// The allocator's metadata: a fixed-capacity slot array, a user-pointer hash index and the
// quarantine FIFO, all in mmap'd memory (never malloc: the allocator serves malloc itself).
//
// Invariants (under `mutex`):
//  * a slot is Free (on the free list), Live (indexed by user pointer) or Quarantined (indexed,
//    and on the FIFO from q_head to q_tail through `next`);
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
#include "stack_depot.hpp"

namespace mate::guard {

inline constexpr std::uint32_t kNoSlot = 0xffffffffu;

// 64 bytes: the quarantine holds thousands of these (bench/README.md "guard"). The placement is
// kept in 4 KiB units (every backend's granularity is a multiple of 4 KiB; GuardAllocator checks)
// and the id in 48 bits. Backtraces are handles into the table's StackDepot.
struct Slot {
  static constexpr unsigned kUnitShift = 12;
  // The largest reservation a slot can describe (2^32 units of 4 KiB: 16 TiB).
  static constexpr std::size_t kMaxReserved = (std::size_t{1} << 32 << kUnitShift) - (std::size_t{1} << kUnitShift);

  std::uintptr_t reservation;
  std::uintptr_t user;
  std::size_t size;
  std::uint32_t reserved_units;
  std::uint32_t mapping_units;  // the mapping's offset in the reservation
  std::uint32_t mapped_units;
  pid_t alloc_tid;
  pid_t free_tid;
  std::uint32_t next;  // free list or quarantine FIFO
  std::uint32_t alloc_stack;  // StackDepot handle (0 = none)
  std::uint32_t free_stack;
  std::uint32_t id_low;
  std::uint16_t id_high;
  std::atomic<std::uint8_t> state;  // State
  Mode mode;

  static constexpr std::uint64_t kIdMask = (std::uint64_t{1} << 48) - 1;
  std::uint64_t id() const noexcept { return (std::uint64_t{id_high} << 32) | id_low; }
  std::size_t reserved() const noexcept { return std::size_t{reserved_units} << kUnitShift; }
  std::uintptr_t mapping() const noexcept { return reservation + (std::uintptr_t{mapping_units} << kUnitShift); }
  std::size_t mapped() const noexcept { return std::size_t{mapped_units} << kUnitShift; }

  void set_id(std::uint64_t id) noexcept {
    id_low = static_cast<std::uint32_t>(id);
    id_high = static_cast<std::uint16_t>(id >> 32);
  }
  // All four are multiples of 4 KiB, reserved <= kMaxReserved, and the mapping lies in the
  // reservation.
  void set_placement(std::uintptr_t reservation_start, std::size_t reserved_bytes, std::uintptr_t mapping_start,
                     std::size_t mapped_bytes) noexcept {
    reservation = reservation_start;
    reserved_units = static_cast<std::uint32_t>(reserved_bytes >> kUnitShift);
    mapping_units = static_cast<std::uint32_t>((mapping_start - reservation_start) >> kUnitShift);
    mapped_units = static_cast<std::uint32_t>(mapped_bytes >> kUnitShift);
  }
  // What describes the allocation (everything but state and next), for a copy taken under the
  // table's lock and used after it.
  void copy_allocation_from(const Slot& s) noexcept {
    reservation = s.reservation;
    user = s.user;
    size = s.size;
    reserved_units = s.reserved_units;
    mapping_units = s.mapping_units;
    mapped_units = s.mapped_units;
    alloc_tid = s.alloc_tid;
    free_tid = s.free_tid;
    alloc_stack = s.alloc_stack;
    free_stack = s.free_stack;
    id_low = s.id_low;
    id_high = s.id_high;
    mode = s.mode;
  }
};
static_assert(sizeof(Slot) == 64, "a quarantined allocation's record should stay small");

class SlotTable {
 public:
  // Throws GuardError when the tables cannot be mapped.
  explicit SlotTable(std::size_t capacity);
  ~SlotTable();
  SlotTable(const SlotTable&) = delete;
  SlotTable& operator=(const SlotTable&) = delete;

  // Under `mutex`:
  std::uint32_t take_free() noexcept;  // kNoSlot when full
  void put_free(std::uint32_t index) noexcept;
  // Indexes slot `index` by its `user` pointer (set before the call). False when the index
  // cannot grow (no memory for a bigger table).
  bool index_insert(std::uint32_t index) noexcept;
  std::uint32_t index_find(std::uintptr_t user) const noexcept;  // kNoSlot when absent
  void index_erase(std::uintptr_t user) noexcept;
  void quarantine_push(std::uint32_t index) noexcept;
  std::uint32_t quarantine_pop() noexcept;  // oldest, kNoSlot when empty

  Slot& slot(std::uint32_t index) noexcept { return slots_[index]; }
  const Slot& slot(std::uint32_t index) const noexcept { return slots_[index]; }
  std::uint32_t high_water() const noexcept { return high_water_.load(std::memory_order_acquire); }

  mutable std::mutex mutex;
  StackDepot depot{kDepotStacks};  // put() under `mutex`
  static constexpr std::uint32_t kDepotStacks = 1u << 18;
  Stats stats{};
  std::uint64_t next_id = 1;
  std::atomic<bool> refusal_said{false};
  // Bounds of every reservation ever made, for GuardAllocator::may_hold().
  std::atomic<std::uintptr_t> lowest{UINTPTR_MAX};
  std::atomic<std::uintptr_t> highest{0};
  // Host staging buffer for device canary copies (guarded by scratch_mutex).
  std::mutex scratch_mutex;
  unsigned char* scratch = nullptr;
  static constexpr std::size_t kScratchBytes = std::size_t{256} << 10;

 private:
  void grow_index() noexcept;

  std::size_t capacity_;
  std::size_t index_capacity_;  // power of two; grows (mmap + rehash) to stay at most 3/4 full
  std::size_t index_used_ = 0;
  Slot* slots_;
  // Open addressing with linear probing over slot numbers: entry = slot index + 1 (0 = empty),
  // the key is that slot's user pointer. No key array: 4 bytes an entry instead of 12, and the
  // index holds every quarantined allocation too (double frees are found through it).
  std::uint32_t* entries_;
  std::uintptr_t key(std::size_t i) const noexcept { return slots_[entries_[i] - 1].user; }
  std::uint32_t free_head_ = kNoSlot;
  std::atomic<std::uint32_t> high_water_{0};
  std::uint32_t q_head_ = kNoSlot;
  std::uint32_t q_tail_ = kNoSlot;
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
