// The allocator core's reports and messages, away from its allocation path: canary checks at
// free and in check_all with their corruption reports, double and invalid frees, a refused
// mapping, a config's text. Written with ReportWriter (no malloc, async-signal-safe).
#include "guard/allocator_reports.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "guard/canary.hpp"
#include "guard/platform/map_entry_budget.hpp"
#include "mate/core/crash_context.hpp"
#include "mate/device/vendors.hpp"
#include "mate/guard/device_fault_report.hpp"

namespace mate::guard {

namespace {

using device::kind_title;

}  // namespace

CanaryRanges canary_ranges(const Slot& s) noexcept {
  CanaryRanges r;
  if (s.mapped() == 0) return r;
  r.before = s.mapping();
  r.before_bytes = s.user - s.mapping();
  r.after = s.user + s.size;
  r.after_bytes = s.mapping() + s.mapped() - r.after;
  return r;
}

void write_status(ReportWriter& w, device::Status status) noexcept {
  w.str(status.what != nullptr ? status.what : "backend call").str(" failed (error ").sdec(status.code);
  if (status.code == ENOMEM) w.str(", ENOMEM");
  w.chr(')');
}

namespace {

// Writes a canary corruption report for one side.
void report_canary(const StackDepot& depot, const Slot& s, const char* backend, bool before, std::size_t canary_bytes,
                   const CanaryCheck& c, const char* when) noexcept {
  {
    ReportWriter w(kStderr);
    w.str("mate guard: canary corrupted ").str(when).str(": ");
    write_allocation(w, s, backend);
    w.str("\n  side: ").str(before ? "before the start (underrun)" : "past the end (overflow)");
    w.str("\n  first corrupted byte: ");
    if (before) {
      w.dec(s.user - c.first).str(" bytes before the start (offset -").dec(s.user - c.first).chr(')');
    } else {
      w.dec(c.first - (s.user + s.size)).str(" bytes past the end (offset ").dec(c.first - s.user).chr(')');
    }
    w.str("\n  corrupted bytes: ").dec(c.differing).str(" of ").dec(canary_bytes).str(" canary bytes");
    w.str("\n  expected:");
    for (int i = 0; i < c.shown; ++i) w.chr(' ').byte(c.expected[i]);
    w.str("\n  found:   ");
    for (int i = 0; i < c.shown; ++i) w.chr(' ').byte(c.found[i]);
    if (!before && s.mode == Mode::Tail) {
      // The size rounded up to the alignment ends at the guard: the write stayed in the padding,
      // which no mode can make fault (head mode pads up to the page).
      w.str("\n  next: the write stayed within the alignment padding after the end, before the guard region; "
            "no mode faults there (head mode leaves more bytes before its guard), so it is caught here, at free");
    } else {
      const char* other = to_string(other_mode(s.mode));
      w.str("\n  next: the ").str(to_string(s.mode)).str(" mode guard region did not see this access; rerun in ")
          .str(other).str(" mode (mate guard-run --mode ").str(other).str("; --guard-mode ").str(other)
          .str(" for mate replay and test programs) to fault at the first invalid access");
    }
    w.chr('\n');
  }
  // The free that found it (the stack of the call to free), then where the allocation was made.
  // (A free sets free_tid; check_all() checks live allocations, which have none.)
  if (s.free_tid != 0) write_stack(kStderr, "freed", depot, s.free_stack, s.free_tid);
  write_stack(kStderr, "allocated", depot, s.alloc_stack, s.alloc_tid);
  write_program_context(kStderr);
}

}  // namespace

SlotCheck check_slot(device::Backend& backend, SlotTable& table, const Slot& s, const char* when) noexcept {
  SlotCheck result;
  if (s.mapped() == 0) return result;
  CanaryRanges r = canary_ranges(s);
  CanaryCheck before, after;
  device::Status before_status, after_status;
  {
    std::unique_lock<std::mutex> scratch_lock(table.scratch_mutex, std::defer_lock);
    if (backend.kind() != device::Kind::Host) scratch_lock.lock();
    before_status = check_canary(backend, r.before, r.before_bytes, table.scratch, SlotTable::kScratchBytes, &before);
    after_status = check_canary(backend, r.after, r.after_bytes, table.scratch, SlotTable::kScratchBytes, &after);
  }
  // A read that failed part way may still have seen differing bytes: those are real corruption.
  if (before.differing > 0) {
    report_canary(table.depot, s, backend.name(), true, r.before_bytes, before, when);
    ++result.bad;
    result.before_bad = true;
    result.before_first = s.user - before.first;
  }
  if (after.differing > 0) {
    report_canary(table.depot, s, backend.name(), false, r.after_bytes, after, when);
    ++result.bad;
    result.after_bad = true;
    result.after_first = after.first - (s.user + s.size);
  }
  result.unchecked = !before_status.ok() ? before_status : after_status;
  if (!result.unchecked.ok()) {
    ReportWriter w(kStderr);
    w.str("mate guard: canary not checked ").str(when).str(": ");
    write_allocation(w, s, backend.name());
    w.str(": ");
    write_status(w, result.unchecked);
    w.chr('\n');
  }
  return result;
}

void write_outcome(int fd, const Slot& s, const SlotCheck& c) noexcept {
  if (fd < 0) return;
  for (int side = 0; side < 2; ++side) {
    if (!(side == 0 ? c.before_bad : c.after_bad)) continue;
    ReportWriter w(fd);
    w.str("canary ").str(side == 0 ? "before " : "after ").dec(side == 0 ? c.before_first : c.after_first);
    w.str(" id ").dec(s.id()).str(" size ").dec(s.size).str(" mode ").str(to_string(s.mode)).chr('\n');
  }
}

void note_sync(device::Status status) noexcept {
  if (!status.ok()) report_illegal_address(status.code, status.what);
}

[[noreturn]] void stop() noexcept {
  ReportWriter(kStderr).str("mate guard: aborting (on_corruption=abort)\n");
  std::abort();
}

const char* to_string(Mode mode) noexcept { return mode == Mode::Tail ? "tail" : "head"; }
const char* to_string(OnCorruption action) noexcept {
  return action == OnCorruption::Abort ? "abort" : "continue";
}

// Only for the message of a refused install: kept with the seldom-run code (preload_layout.ld).
[[gnu::cold]] std::string describe(const GuardAllocatorConfig& c) {
  return std::string("mode=") + to_string(c.mode) + " sync_on_free=" + (c.sync_on_free ? "1" : "0") +
         " log_allocations=" + (c.log_allocations ? "1" : "0") +
         " backtraces=" + (c.backtraces ? "1" : "0") +
         " quarantine_bytes=" +
         (c.quarantine_bytes == kQuarantineForBackend ? std::string("backend-default") : std::to_string(c.quarantine_bytes)) +
         " on_corruption=" + to_string(c.on_corruption) + " backend=" + kind_title(c.backend) +
         " max_allocations=" + std::to_string(c.max_allocations) + " skip_frames=" + std::to_string(c.skip_frames) +
         " map_entry_limit=" + std::to_string(c.map_entry_limit) +
         " low_priority_entry_limit=" + std::to_string(c.low_priority_entry_limit);
}

// The double free of `ptr`, already freed as `freed`, by this free's `frames`; stops the process
// unless config.on_corruption is Continue. Under table_->mutex.
FreeResult GuardAllocator::report_double_free(std::uintptr_t ptr, const Slot& freed, void* const* frames,
                                              int frame_count) noexcept {
  table_->stats.double_frees += 1;
  {
    ReportWriter w(kStderr);
    w.str("mate guard: double free of ").hex(ptr).str(": ");
    write_allocation(w, freed, backend_.name());
    w.str(" was already freed\n");
  }
  write_frames(kStderr, "this free, called", frames, frame_count, gettid());
  write_stack(kStderr, "first freed", table_->depot, freed.free_stack, freed.free_tid);
  write_stack(kStderr, "allocated", table_->depot, freed.alloc_stack, freed.alloc_tid);
  write_program_context(kStderr);
  if (config_.on_corruption == OnCorruption::Abort) stop();
  return FreeResult::DoubleFree;
}

// Says once that guarded allocations cannot get more mappings: the system refused one (`status`),
// or the process is at the memory-map entries the allocator may map up to (config.map_entry_limit).
void GuardAllocator::say_mapping_refused(const device::Status* status) noexcept {
  if (table_->refusal_said.exchange(true)) return;
  Stats st = stats();
  ReportWriter w(kStderr);
  if (status != nullptr) {
    w.str("mate guard: the system refused another mapping: ");
    write_status(w, *status);
  } else {
    w.str("mate guard: the guarded allocations have used up their share of the memory map entries the system "
          "allows (vm.max_map_count; the guard maps up to ")
        .dec(config_.map_entry_limit)
        .str(" entries in the process, the rest is left to the program's own threads, libraries and files)");
  }
  w.str(", with ").dec(st.live).str(" guarded allocations live. Each guarded allocation needs its own "
                                   "mappings (2 to 3 memory map entries on the host). Remedy: raise the "
                                   "limit (sudo sysctl -w vm.max_map_count=1048576), or guard fewer "
                                   "allocations (MATE_GUARD_MIN_BYTES). Allocations that cannot be "
                                   "mapped are not guarded (");
  if (status != nullptr) w.str("under mate guard-run, no new allocation is guarded from now on");
  else w.str("until frees of guarded allocations make room again");
  w.str("); this is said once.\n");
}

// Said once, when the small blocks first find their share used up (mate guard-run: the
// interpreter's own malloc/calloc/realloc blocks below MATE_GUARD_SMALL_BYTES).
void GuardAllocator::say_low_priority_share_used() noexcept {
  if (table_->low_priority_refusal_said.exchange(true)) return;
  Stats st = stats();
  const std::size_t in_use = map_budget_ != nullptr ? map_budget_->last_count() : 0;
  ReportWriter w(kStderr);
  w.str("mate guard: memory map entries are getting short: the process has ")
      .dec(in_use)
      .str(", small blocks may use up to ")
      .dec(config_.low_priority_entry_limit)
      .str(" and the guard up to ")
      .dec(config_.map_entry_limit)
      .str(" (vm.max_map_count less the program's reserve). From now on small blocks are guarded only as "
           "guarded ones are freed; tensors, aligned and large allocations keep the rest. ")
      .dec(st.allocations)
      .str(" allocations guarded so far, ")
      .dec(st.live)
      .str(" live. Remedy: raise the limit (sudo sysctl -w vm.max_map_count=1048576); "
           "mate guard-run --summary counts what was not guarded. This is said once.\n");
}

void GuardAllocator::report_invalid_pointer(std::uintptr_t ptr, const char* operation, void* const* frames,
                                            int frame_count) noexcept {
  Description d = describe(ptr);
  {
    ReportWriter w(kStderr);
    if (std::strcmp(operation, "free") == 0) w.str("mate guard: invalid free of ").hex(ptr);
    else w.str("mate guard: invalid pointer ").hex(ptr).str(" passed to ").str(operation);
    w.str(": not a pointer this allocator returned");
    if (d.found) {
      w.str("; it lies ");
      write_place(w, d);
    }
    w.chr('\n');
  }
  write_frames(kStderr, std::strcmp(operation, "free") == 0 ? "freed" : "called", frames, frame_count, gettid());
  write_program_context(kStderr);
  if (config_.on_corruption == OnCorruption::Abort) stop();
}

}  // namespace mate::guard
