// The preload library's own small heap: it serves the allocations made while a thread is inside
// the guard (config parsing at start-up, the unwinder's first dlopen, a device driver loaded by
// the guard), so the guard never calls into glibc's allocator in a process whose allocations it
// serves. Starting glibc's allocator costs a few hundred KiB of resident memory in every guarded
// process (its code pages, its arena) for a handful of bookkeeping allocations.
//
// Contract: blocks come from one reserved region (MAP_NORESERVE: only touched pages cost
// memory), in power-of-two size classes with per-class free lists. Requests it does not serve
// (too large, over-aligned past a page, region full) return nullptr and the caller falls back
// to the real allocator. Any thread may free an arena block, inside the guard or not: free(),
// realloc() and malloc_usable_size() check arena_owns() first. Thread-safe; fork-safe through
// arena_prepare_fork() / arena_after_fork().
#pragma once

#include <cstddef>

// Private to the preload library (its exports are the allocation family only).
#pragma GCC visibility push(hidden)

namespace mate::guard::preload {

// nullptr when the arena cannot serve the request. Blocks are 16-byte aligned, or `alignment`
// (a power of two, at most a page). `zero`: the block reads as zeros (calloc).
void* arena_allocate(std::size_t size, std::size_t alignment, bool zero) noexcept;
// True when `p` lies in the arena's region (a block it returned).
bool arena_owns(const void* p) noexcept;
// Ends the process with a message when `p` is not a block the arena handed out and still holds
// (an invalid or double free by code running inside the guard, such as a driver it loaded).
void arena_free(void* p) noexcept;
// The usable size of an arena block.
std::size_t arena_usable_size(const void* p) noexcept;

void arena_prepare_fork() noexcept;
void arena_after_fork() noexcept;

}  // namespace mate::guard::preload

#pragma GCC visibility pop
