// Which allocation an address belongs to: the lock-free search of a slot table that the crash
// handler and GuardAllocator::describe() share, and the one copy of a found slot into a
// Description (where the address lies relative to it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "guard/slot_table.hpp"
#include "mate/guard/allocator.hpp"

namespace mate::guard {

// Slot copies leave out the state (an atomic); reports need it.
inline void copy_with_state(Slot* to, const Slot& from) noexcept {
  to->copy_allocation_from(from);
  to->state.store(from.state.load(std::memory_order_acquire), std::memory_order_relaxed);
}

// Reads into `out` the allocation (live or quarantined) whose reservation holds `address`, else
// the nearest within `granularity` of it (*outside = true); false when none. Lock-free,
// async-signal-safe.
bool find_allocation(const SlotTable& table, std::size_t granularity, std::uintptr_t address, Slot* out,
                     bool* outside) noexcept;

// Slot `s` (found for `address`, `outside` its reservation or not) as a Description.
// Async-signal-safe.
Description describe_slot(const Slot& s, std::uintptr_t address, bool outside) noexcept;

// find_allocation's answer as a Description. Outside a signal handler, hold table.mutex
// (GuardAllocator::describe does): slots are written under it.
Description describe_in_table(const SlotTable& table, std::size_t granularity, std::uintptr_t address) noexcept;

}  // namespace mate::guard
