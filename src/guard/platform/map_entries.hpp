// The process's memory-map entries (the unit of vm.max_map_count), counted for the guard's
// map-entry limit (GuardAllocatorConfig::map_entry_limit). Host platform code (Linux /proc).
#pragma once

#include <cstddef>

namespace mate::guard {

// The entries the process has now, into `*out`: the lines of /proc/self/maps, read with plain
// system calls (no allocation: this runs inside malloc). False when the file cannot be opened or
// read through (no descriptor free): no partial count. ~27 ms at 60,000 entries: the allocator
// counts only when its upper estimate nears the limit.
bool count_map_entries(std::size_t* out) noexcept;

}  // namespace mate::guard
