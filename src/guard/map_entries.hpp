// The process's memory-map entries (the unit of vm.max_map_count), counted for the guard's
// map-entry limit (GuardAllocatorConfig::map_entry_limit). Host platform code (Linux /proc).
#pragma once

#include <cstddef>

namespace mate::guard {

// The entries the process has now: the lines of /proc/self/maps, read with plain system calls
// (no allocation: this runs inside malloc). 0 when the file cannot be read. Costs ~1 ms for 1,000
// entries: the allocator counts only when its upper estimate nears the limit.
std::size_t count_map_entries() noexcept;

}  // namespace mate::guard
