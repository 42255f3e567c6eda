// The crash handler: SIGSEGV/SIGBUS in a guard region or a quarantined range becomes one report,
// then the process dies of the original signal. Faults elsewhere go to the previous handler.
#pragma once

#include <cstdint>

#include "mate/guard/allocator.hpp"
#include "slot_table.hpp"

namespace mate::guard {

// Installs the handler once per process (later calls do nothing).
void install_fault_handler() noexcept;

// Reads into `out` the allocation (live or quarantined) whose reservation holds `address`, else
// the nearest within `granularity` of it (*outside = true); false when none. Lock-free,
// async-signal-safe.
bool find_allocation(const SlotTable& table, std::size_t granularity, std::uintptr_t address, Slot* out,
                     bool* outside) noexcept;
// find_allocation's answer as a Description. Outside a signal handler, hold table.mutex
// (GuardAllocator::describe does): slots are written under it.
Description describe_in_table(const SlotTable& table, std::size_t granularity, std::uintptr_t address) noexcept;

}  // namespace mate::guard
