// Stack walking from the unwind tables read with pread(), with each return address's frame rule
// cached: the allocation and free backtraces' fast path (x86-64 Linux).
//
// Why not only the C++ unwinder (_Unwind_Backtrace): it reads the unwind tables (.eh_frame_hdr,
// .eh_frame) of every module it walks through from their mappings, so each guarded process gets
// those pages and the kernel's 64 KiB fault-around windows resident (~220 KiB of libstdc++, libc
// and libgcc_s pages in the guard bench, bench/README.md "guard"), and it interprets the CFI
// program of every frame at every call (~4 µs a backtrace). Here the tables are read from the
// files, which leaves the pages in the page cache and out of the process, and each return
// address's rule (where its caller's frame and return address are) is interpreted once and then
// found in a lock-free cache. No library does this: libunwind also reads the mappings.
//
// The walk handles the frames compilers emit for ordinary code (CFA = rsp or rbp + offset, rbp
// saved at a CFA offset or unchanged, return address at CFA-8). Anything else (signal frames,
// DWARF expressions, stack realignment, code with no module or no file, a file that is not the
// one mapped) makes it answer "unsupported", and the caller falls back to _Unwind_Backtrace for
// the whole backtrace, so the frames are never fewer or different from what the C++ unwinder
// gives; such a return address is remembered, so the next walk through it goes there at once.
// A module's file is trusted only when its program headers, notes (the build id) and the bytes
// before the return address match what is mapped. Unloading a module (dlclose) empties the cache.
#pragma once

#include <cstdint>

namespace mate::guard {

enum class TableWalk {
  kComplete,     // frames[0, n) are the whole stack, or the first `max` frames of it
  kUnsupported,  // a frame the table walk does not handle: use the C++ unwinder instead
};

// Walks from a frame given by its return address `pc`, its caller's stack pointer at the call
// (the CFA of the frame `pc` returns from) and the frame-pointer register's value there.
// Records `pc` first. Not async-signal-safe: it takes the loader's lock once a walk (to see
// unloads), and on a cache miss while it reads a module's file. Allocates nothing; preserves
// errno; uses ~5 KiB of stack on a miss.
TableWalk walk_with_unwind_tables(std::uintptr_t pc, std::uintptr_t sp, std::uintptr_t fp, void** frames, int max,
                                  int* n) noexcept;

// Counters for tests and benchmarks.
struct TableUnwinderStats {
  std::uint64_t table_reads;    // frames whose rule was read from the tables (cache misses)
  std::uint64_t unsupported;    // walks that answered kUnsupported
};
TableUnwinderStats table_unwinder_stats() noexcept;
// Empties the rule cache (tests: the next walk reads the tables again).
void clear_table_unwinder_cache() noexcept;

}  // namespace mate::guard
