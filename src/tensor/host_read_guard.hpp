// Reading host memory that may not be readable, without a crash (level-5 statistics, dumps).
//
// A tensor's data pointer can be stale (freed), wild, or a device address described as CPU
// memory. The statistics read it before the call's inputs record is written, so a fault there
// would end the program before the record that explains it exists: at level 3 the same program
// logs the call and then crashes in the kernel. Reads go through read_host_guarded instead: a
// fault inside the range being read ends only that read.
#pragma once

#include <cstdint>
#include <string>

#include "float_controls.hpp"

namespace mate::tensor::detail {

// Runs read(context), which reads host memory within [lo, hi), and returns true. When one of
// those reads faults (SIGSEGV or SIGBUS at an address in that range's pages, or a general
// protection fault: an address with garbage in its high bits), read is abandoned where it was
// (siglongjmp: it must hold nothing that needs destroying), the thread's floating-point controls
// are set to `controls` (those in effect for the read: a handler starts without them), and false
// is returned with the address in `fault` (the range's start when the fault gives none). A range
// that wraps around the top of the address space is not read. A fault anywhere else goes to
// the handler that was there before, run as the kernel would have run it, or to the default
// action.
//
// The handler is installed on the first call, once per process, with SA_NODEFER and SA_ONSTACK,
// after reading the actions in place. A handler the program installs later replaces it (reads
// are then unguarded again, as before). Under `mate guard-run` none is installed: the guard owns
// these signals (its report names the API call in flight) and reads go unguarded.
bool read_host_guarded(std::uintptr_t lo, std::uintptr_t hi, void (*read)(void*), void* context,
                       const FloatControls& controls, std::uintptr_t& fault) noexcept;

// Whether [lo, hi) can be read: one guarded read per page (for code that then reads it with
// functions of its own, such as a dump's checksum; memory unmapped in between is not covered).
// False with the first unreadable address in `fault`.
bool host_range_readable(std::uintptr_t lo, std::uintptr_t hi, std::uintptr_t& fault) noexcept;

// What a read of the tensor spanning [lo, hi) that faulted at `fault` says: "host memory not
// readable at 0x... (the tensor spans [0x..., 0x...))" (statistics prefix it, copies return it).
std::string host_memory_not_readable(std::uintptr_t fault, std::uintptr_t lo, std::uintptr_t hi);

}  // namespace mate::tensor::detail
