// mate/guard/device_fault_report.hpp — the device-fault report: the device memory ranges recent API
// calls passed (recorded in mate/core/recent_device_ranges.hpp), related to guarded allocations.
//
// A device fault is not a host signal: the driver reports CUDA_ERROR_ILLEGAL_ADDRESS (700; the
// MUSA driver uses the same code) at the next synchronization and gives no address. The API log
// (level >= 3, src/log) records the address range of every non-CPU tensor argument; when the
// guarded allocator's synchronize (sync_on_free, check_all) sees the illegal-address error it
// prints, once per process, the live or quarantined allocation nearest to each recorded range.
//
// The ranges live in core, below both the log that records them and the guard that reports them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mate::guard {

// Writes one line per recorded range, newest first, each with the nearest guarded allocation
// (describe() of its first and last byte); returns the number of ranges written.
std::size_t write_recent_ranges(int fd) noexcept;

// The device result code for an illegal address (CUDA_ERROR_ILLEGAL_ADDRESS, MUSA's equal).
inline constexpr int kIllegalAddressError = 700;

// When `code` is kIllegalAddressError, writes the device-fault report to stderr (what the error
// means, the recent ranges with their nearest allocations, how to get the faulting address) and
// returns true; said once per process, as the error is sticky. `where` names the call that
// returned it ("cuCtxSynchronize"). Other codes: nothing, false. The guarded allocator calls this
// after each synchronize; code that synchronizes itself may too, but not from a Backend's own
// code or a signal handler (it takes the allocators' locks to describe the ranges).
bool report_illegal_address(int code, const char* where) noexcept;

}  // namespace mate::guard
