// A guarded allocation's record while it is live (and while its free is in progress); a
// quarantined one is kept in the smaller QuarantineRecord (quarantine.hpp) and read back as a Slot.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "mate/guard/allocator.hpp"

namespace mate::guard {

inline constexpr std::uint32_t kNoSlot = 0xffffffffu;

// 64 bytes. The placement is kept in 4 KiB units (every backend's granularity is a multiple of
// 4 KiB; GuardAllocator checks) and the id in 48 bits. Backtraces are handles into the table's StackDepot.
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
static_assert(sizeof(Slot) == 64, "a live allocation's record should stay small");

}  // namespace mate::guard
