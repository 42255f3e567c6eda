// The allocator core's checks and reports that allocator.cpp and allocator_reports.cpp share:
// a live allocation's canary ranges, the canary check of one allocation, backend status text and
// the stop after a corruption report.
#pragma once

#include <cstddef>
#include <cstdint>

#include "guard/report.hpp"
#include "guard/report_output.hpp"
#include "guard/slot_table.hpp"
#include "mate/device/backend.hpp"

namespace mate::guard {

// The guard's output: the program's stderr as it was at start-up and the report file
// (report_output.hpp).
inline constexpr int kStderr = kReportOutput;

// The canary ranges of a live allocation: before the user pointer and after its end.
struct CanaryRanges {
  std::uintptr_t before = 0;
  std::size_t before_bytes = 0;
  std::uintptr_t after = 0;
  std::size_t after_bytes = 0;
};
CanaryRanges canary_ranges(const Slot& s) noexcept;

// "<what> failed (error <code>[, ENOMEM])"
void write_status(ReportWriter& w, device::Status status) noexcept;

// What check_slot found: corrupted sides, and the first failed read (a canary that could not be
// read is not known intact, so it is neither counted as intact nor as corrupted).
struct SlotCheck {
  int bad = 0;
  device::Status unchecked;
  // The corrupted sides and their first corrupted byte: bytes before the start, past the end.
  bool before_bad = false, after_bad = false;
  std::size_t before_first = 0, after_first = 0;
};
// Checks both canary sides of `s`, reporting each corruption and each side it could not read.
SlotCheck check_slot(device::Backend& backend, SlotTable& table, const Slot& s, const char* when) noexcept;

// One line per corrupted side to `fd` (GuardAllocatorConfig::outcome_fd; nothing when -1):
// "canary before|after FIRST id ID size SIZE mode MODE", FIRST the bytes before the start or
// past the end of the first corrupted byte.
void write_outcome(int fd, const Slot& s, const SlotCheck& c) noexcept;

// A device fault surfaces as the synchronize's sticky illegal-address error: reported when
// `status` is one.
void note_sync(device::Status status) noexcept;

// "mate guard: aborting (on_corruption=abort)", then abort().
[[noreturn]] void stop() noexcept;

}  // namespace mate::guard
