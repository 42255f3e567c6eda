// The allocator core: placement, canaries, quarantine, free-time checks. Platform work goes
// through device::Backend; metadata through SlotTable; text through ReportWriter.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <string>

#include "canary.hpp"
#include "fault_handler.hpp"
#include "map_entries.hpp"
#include "mate/core/crash_context.hpp"
#include "mate/guard/device_fault_report.hpp"
#include "report.hpp"
#include "slot_table.hpp"
#include "stack_capture.hpp"

namespace mate::guard {

namespace {

constexpr int kStderr = 2;

bool is_power_of_two(std::size_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }

// round_up(v, a) for a power of two a; false on overflow.
bool round_up(std::size_t v, std::size_t a, std::size_t* out) noexcept {
  if (v > SIZE_MAX - (a - 1)) return false;
  *out = (v + a - 1) & ~(a - 1);
  return true;
}

const char* kind_title(device::Kind kind) noexcept {
  switch (kind) {
    case device::Kind::Host: return "host";
    case device::Kind::Cuda: return "CUDA";
    case device::Kind::Musa: return "MUSA";
  }
  return "?";
}

const char* capture_message(device::Kind kind) noexcept {
  return kind == device::Kind::Musa ? "guard allocator debug mode does not support MUSA graph capture"
                                    : "guard allocator debug mode does not support CUDA graph capture";
}

// Not inlined, so the frames to skip are exactly this function and the allocator's entry point.
__attribute__((noinline)) int capture(void** frames, bool enabled, int skip_more) noexcept {
  if (!enabled) return 0;
  constexpr int kRaw = kMaxFrames + 8;
  void* raw[kRaw];
  int n = capture_stack(raw, kRaw);
  int skip = 2 + (skip_more > 0 && skip_more <= 6 ? skip_more : 0);
  if (skip > n) skip = n;
  int kept = n - skip > kMaxFrames ? kMaxFrames : n - skip;
  for (int i = 0; i < kept; ++i) frames[i] = raw[i + skip];
  return kept;
}

// The canary ranges of a live allocation: before the user pointer and after its end.
struct CanaryRanges {
  std::uintptr_t before = 0;
  std::size_t before_bytes = 0;
  std::uintptr_t after = 0;
  std::size_t after_bytes = 0;
};

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

// One canary report; returns true when a side was corrupted.
struct SideResult {
  CanaryCheck check;
  device::Status status;
};

}  // namespace

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
         " map_entry_limit=" + std::to_string(c.map_entry_limit);
}

std::size_t default_quarantine_bytes(device::Kind kind) noexcept {
  return kind == device::Kind::Host ? std::size_t{64} << 20 : std::size_t{64} << 30;
}

GuardAllocator::GuardAllocator(device::Backend& backend, const GuardAllocatorConfig& config)
    : backend_(backend),
      config_(config),
      quarantine_limit_(config.quarantine_bytes == kQuarantineForBackend ? default_quarantine_bytes(backend.kind())
                                                                          : config.quarantine_bytes),
      table_(nullptr) {
  if (!is_power_of_two(backend.granularity()) || !is_power_of_two(backend.default_alignment()))
    throw GuardError(std::string("guard allocator: backend ") + backend.name() +
                     " reports a granularity or alignment that is not a power of two");
  if (backend.granularity() % (std::size_t{1} << Slot::kUnitShift) != 0)
    throw GuardError(std::string("guard allocator: backend ") + backend.name() + " reports a granularity of " +
                     std::to_string(backend.granularity()) + " bytes; it must be a multiple of 4096");
  table_ = new SlotTable(config.max_allocations, backend.granularity());
  // Uncounted (no descriptor free): the first check counts, or refuses.
  if (config.map_entry_limit != 0 && !count_map_entries(&counted_map_entries_))
    counted_map_entries_ = config.map_entry_limit;
  map_entries_base_ = counted_map_entries_;
  register_allocator(this, table_);
  install_fault_handler();
}

GuardAllocator::~GuardAllocator() {
  unregister_allocator(this);
  // Give every reservation back: live ones too (the owner is going away).
  for (std::uint32_t i = 0; i < table_->high_water(); ++i) {
    Slot& s = table_->slot(i);
    auto state = static_cast<State>(s.state.load());
    if (state == State::None) continue;
    if (state == State::Live && s.mapped() != 0) backend_.unmap(s.mapping(), s.mapped());
    backend_.release(s.reservation, s.reserved());
  }
  for (Slot s; table_->quarantine_pop(&s);) backend_.release(s.reservation, s.reserved());
  delete table_;
}

// Gives the oldest quarantined allocation's address space back (under table_->mutex); false
// when the quarantine is empty.
bool GuardAllocator::evict_oldest_locked() noexcept {
  Slot s;
  if (!table_->quarantine_pop(&s)) return false;
  backend_.release(s.reservation, s.reserved());
  map_entries_since_count_ += 1;  // a hole in a range of inaccessible pages splits its entry
  table_->stats.quarantined -= 1;
  table_->stats.quarantined_bytes -= s.reserved();
  return true;
}

// Room for one more allocation's entries (a reservation and the mapping in it split one
// inaccessible range into three at most) under either upper estimate: the last count plus 3 an
// allocation since; or the entries not the guard's at the last count plus 3 a live allocation
// and 1 a quarantined range (what its reservations can split into). The first grows with every
// allocation, freed or not; the second lets a program that frees as it goes run without counts,
// but misses the program's own mappings since the count, so it is trusted only for 8/3 x the
// limit allocations after it (then the first, long past the limit, forces a count).
bool GuardAllocator::map_entries_fit() const noexcept {
  const std::size_t since_count = counted_map_entries_ + map_entries_since_count_;
  std::size_t estimate = since_count;
  const std::size_t stale_after = 8 * (config_.map_entry_limit / 3);
  if (allocations_since_count_ < stale_after) {
    const std::size_t live = table_->stats.live + map_allocations_in_flight_.load(std::memory_order_acquire);
    const std::size_t by_allocation = map_entries_base_ + 3 * live + table_->quarantined();
    if (by_allocation < estimate) estimate = by_allocation;
  }
  return estimate + 3 <= config_.map_entry_limit;
}

// True when one more allocation keeps the process's memory-map entries within
// config.map_entry_limit; the allocation then counts as in flight until its mapping is made (or
// not). The estimate is counted again when it would pass the limit: after a count it runs 3
// an allocation above the real figure, so counts come once per (limit - entries) / 3
// allocations, and allocations stop while room for kMinRoomAllocations is left rather than count
// every few. After a refusal nothing is counted again until that many frees may have made room.
// A count that fails (no descriptor free) leaves the estimate, an upper bound, as it was. The
// program's own new mappings come out of the limit's margin.
bool GuardAllocator::within_map_entry_limit() noexcept {
  constexpr std::size_t kMinRoomAllocations = 256;
  std::lock_guard lock(table_->mutex);
  if (map_limit_refused_ || !map_entries_fit()) {
    if (map_limit_refused_ && frees_since_map_refusal_ < kMinRoomAllocations) return false;
    const auto recount = [&] {
      std::size_t n = 0;
      if (!count_map_entries(&n)) return false;
      counted_map_entries_ = n;
      // Allocations between their check and their mapping may be missing from the count.
      map_entries_since_count_ = 3 * map_allocations_in_flight_.load(std::memory_order_acquire);
      // Each live allocation with bytes has a read-write mapping of its own, between guards.
      const std::size_t own = table_->stats.live - live_unmapped_;
      map_entries_base_ = n > own ? n - own : 0;
      allocations_since_count_ = 0;
      return true;
    };
    const auto room = [&] {
      return counted_map_entries_ + map_entries_since_count_ + 3 * kMinRoomAllocations <= config_.map_entry_limit;
    };
    bool counted = recount();
    // A quarantined range frees an entry when given back only where it does not share one with
    // its neighbours' guard pages (a hole can even split one): half of them at a time, while a
    // count shows it helped.
    while (counted && !room() && table_->quarantined() > 0) {
      const std::size_t before = counted_map_entries_;
      for (std::size_t n = (table_->quarantined() + 1) / 2; n > 0 && evict_oldest_locked(); --n) {
      }
      counted = recount();
      if (counted && counted_map_entries_ >= before) break;
    }
    if (!counted || !room()) {
      map_limit_refused_ = true;
      frees_since_map_refusal_ = 0;
      return false;
    }
    map_limit_refused_ = false;
  }
  map_entries_since_count_ += 3;
  allocations_since_count_ += 1;
  map_allocations_in_flight_.fetch_add(1, std::memory_order_relaxed);
  return true;
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
                                   "mapped are not guarded (under mate guard-run, no new "
                                   "allocation is guarded from now on); this is said once.\n");
}

// True when the backend can still reserve three granules and map the middle one: the shape of
// the smallest guarded allocation.
bool GuardAllocator::small_mapping_possible() noexcept {
  const std::size_t g = backend_.granularity();
  std::uintptr_t base = 0;
  if (!backend_.reserve(3 * g, &base).ok()) return false;
  const bool mapped = backend_.map(base + g, g).ok();
  if (mapped) backend_.unmap(base + g, g);
  backend_.release(base, 3 * g);
  return mapped;
}

AllocResult GuardAllocator::allocate(std::size_t size, std::size_t alignment, void* stream) noexcept {
  const std::size_t g = backend_.granularity();
  std::size_t a = alignment == 0 ? backend_.default_alignment() : alignment;
  if (!is_power_of_two(a))
    return {0, AllocError::BadAlignment, "guard allocator: alignment must be a power of two"};
  bool capturing = false;
  if (backend_.kind() != device::Kind::Host && backend_.is_capturing(stream, &capturing).ok() && capturing)
    return {0, AllocError::Capturing, capture_message(backend_.kind())};

  // Placement (see the header): [guard g][mapping d][guard g], or one unmapped granule for 0.
  // An alignment above the granularity over-reserves a - g bytes, so the mapping can slide
  // until its start (the user pointer) falls on a multiple of a; the slack stays unmapped and
  // widens the guard on one side. The size is padded to the alignment, but to the granularity at
  // most: the mapping's start is aligned already, and padding a 10-byte allocation aligned to
  // 256 MiB to 256 MiB would make all of it resident canary.
  const std::size_t slide = a > g ? a - g : 0;
  const std::size_t pad_to = a > g ? g : a;
  std::size_t rounded = 0, mapped = 0, reserved = 0;
  if (size == 0) {
    reserved = g + slide;
  } else if (!round_up(size, pad_to, &rounded) || !round_up(rounded, g, &mapped) ||
             mapped > SIZE_MAX - 2 * g - slide) {
    return {0, AllocError::TooLarge, "guard allocator: size too large"};
  } else {
    reserved = mapped + 2 * g + slide;
  }
  if (reserved > Slot::kMaxReserved)
    return {0, AllocError::TooLarge, "guard allocator: size too large (a guarded allocation reserves at most 16 TiB)"};

  // Where the mapping goes in a reservation at `b`: right after the leading guard, or slid up
  // (by less than a) to the first multiple of a. round_up cannot overflow here: the reservation
  // extends past the aligned point.
  const auto mapping_at = [&](std::uintptr_t b) noexcept {
    std::size_t aligned = b + g;
    if (slide != 0) (void)round_up(b + g, a, &aligned);
    return static_cast<std::uintptr_t>(aligned);
  };

  if (config_.map_entry_limit != 0 && !within_map_entry_limit()) {
    say_mapping_refused(nullptr);
    return {0, AllocError::MappingRefused, "guard allocator: its share of the memory map entries is used up"};
  }
  // Once this allocation's mappings are made or given up (on every return below), a count sees
  // them: it no longer needs to add them.
  struct InFlight {
    std::atomic<std::size_t>* count;
    ~InFlight() {
      if (count != nullptr) count->fetch_sub(1, std::memory_order_release);
    }
  } in_flight{config_.map_entry_limit != 0 ? &map_allocations_in_flight_ : nullptr};

  void* frames[kMaxFrames];
  int frame_count = capture(frames, config_.backtraces, config_.skip_frames);

  std::uintptr_t base = 0;
  device::Status status = backend_.reserve(reserved, &base);
  if (status.ok() && mapped != 0) {
    status = backend_.map(mapping_at(base), mapped);
    if (!status.ok()) backend_.release(base, reserved);
  }
  // A request too large for what is left (malloc(1 << 50), a full device) is this request's
  // failure, not the system refusing mappings: a program probing for allocation failure must not
  // cost the quarantine or end guarding. Told apart by one small guarded-shape mapping.
  if (!status.ok() && small_mapping_possible())
    return {0, AllocError::NoMemory, "guard allocator: not enough address space or memory for this allocation"};
  if (!status.ok()) {
    // Freeing the quarantine gives back mappings; one retry before giving up.
    std::size_t released = 0;
    {
      std::lock_guard lock(table_->mutex);
      while (evict_oldest_locked()) ++released;
    }
    if (released > 0) {
      status = backend_.reserve(reserved, &base);
      if (status.ok() && mapped != 0) {
        status = backend_.map(mapping_at(base), mapped);
        if (!status.ok()) backend_.release(base, reserved);
      }
    }
  }
  if (!status.ok()) {
    say_mapping_refused(&status);
    return {0, AllocError::MappingRefused, "guard allocator: the system refused another mapping"};
  }

  for (std::uintptr_t lo = table_->lowest.load(); base < lo && !table_->lowest.compare_exchange_weak(lo, base);) {
  }
  for (std::uintptr_t hi = table_->highest.load();
       base + reserved > hi && !table_->highest.compare_exchange_weak(hi, base + reserved);) {
  }
  const std::uintptr_t mapping = mapping_at(base);
  std::uintptr_t user = base;  // zero bytes: the start of an unmapped granule
  if (mapped == 0 && slide != 0) (void)round_up(base, a, &user);
  if (mapped != 0) user = config_.mode == Mode::Tail ? mapping + mapped - rounded : mapping;

  Slot probe{};
  probe.set_placement(base, reserved, mapping, mapped);
  probe.user = user;
  probe.size = size;
  CanaryRanges ranges = canary_ranges(probe);
  if (mapped != 0) {
    std::unique_lock<std::mutex> scratch_lock(table_->scratch_mutex, std::defer_lock);
    if (backend_.kind() != device::Kind::Host) scratch_lock.lock();
    device::Status s1 = write_canary(backend_, ranges.before, ranges.before_bytes, table_->scratch,
                                     SlotTable::kScratchBytes);
    device::Status s2 = write_canary(backend_, ranges.after, ranges.after_bytes, table_->scratch,
                                     SlotTable::kScratchBytes);
    if (!s1.ok() || !s2.ok()) {
      backend_.unmap(mapping, mapped);
      backend_.release(base, reserved);
      return {0, AllocError::BackendError, "guard allocator: writing the canary failed"};
    }
  }

  std::uint64_t id = 0;
  {
    std::lock_guard lock(table_->mutex);
    // Live and quarantined allocations together stay within max_allocations: the oldest
    // quarantined one makes room.
    while (table_->stats.live + table_->quarantined() >= config_.max_allocations && evict_oldest_locked()) {
    }
    std::uint32_t index = table_->take_free();
    if (index != kNoSlot) table_->slot(index).user = user;
    if (index != kNoSlot && !table_->index_insert(index)) {
      table_->put_free(index);
      index = kNoSlot;
    }
    if (index == kNoSlot) {
      if (mapped != 0) backend_.unmap(mapping, mapped);
      backend_.release(base, reserved);
      return {0, AllocError::TableFull,
              "guard allocator: max_allocations allocations are live; raise max_allocations"};
    }
    Slot& s = table_->slot(index);
    id = table_->next_id++ & Slot::kIdMask;  // as reports and free lines show it
    s.set_id(id);
    s.set_placement(base, reserved, mapping, mapped);
    s.user = user;
    s.size = size;
    s.mode = config_.mode;
    s.alloc_tid = gettid();
    s.free_tid = 0;
    s.alloc_stack = table_->depot.put(frames, frame_count);
    s.free_stack = 0;
    s.next = kNoSlot;
    s.state.store(static_cast<std::uint8_t>(State::Live), std::memory_order_release);
    table_->stats.allocations += 1;
    table_->stats.live += 1;
    table_->stats.live_bytes += size;
    if (mapped == 0) live_unmapped_ += 1;
  }
  if (config_.log_allocations) {
    ReportWriter w(kStderr);
    w.str("mate guard: alloc #").dec(id).str(" user ");
    write_range(w, user, size);
    w.str(" size ").dec(size).str(" mode ").str(to_string(config_.mode)).str(" ").str(backend_.name()).str(" guard ");
    if (mapped == 0) {
      write_range(w, base, reserved);
    } else if (config_.mode == Mode::Tail) {
      write_range(w, mapping + mapped, base + reserved - (mapping + mapped));
    } else {
      write_range(w, base, mapping - base);
    }
    w.chr('\n');
  }
  return {user, AllocError::None, nullptr};
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
  write_stack(kStderr, "allocated", depot, s.alloc_stack, s.alloc_tid);
  core::write_crash_context(kStderr);
}

// What check_slot found: corrupted sides, and the first failed read (a canary that could not be
// read is not known intact, so it is neither counted as intact nor as corrupted).
struct SlotCheck {
  int bad = 0;
  device::Status unchecked;
};

// Checks both canary sides of `s`, reporting each corruption and each side it could not read.
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
  }
  if (after.differing > 0) {
    report_canary(table.depot, s, backend.name(), false, r.after_bytes, after, when);
    ++result.bad;
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

// A device fault surfaces as the synchronize's sticky illegal-address error.
void note_sync(device::Status status) noexcept {
  if (!status.ok()) report_illegal_address(status.code, status.what);
}

[[noreturn]] void stop() noexcept {
  ReportWriter(kStderr).str("mate guard: aborting (on_corruption=abort)\n");
  std::abort();
}

}  // namespace

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
  core::write_crash_context(kStderr);
  if (config_.on_corruption == OnCorruption::Abort) stop();
}

void GuardAllocator::report_invalid_pointer(std::uintptr_t ptr, const char* operation) noexcept {
  void* frames[kMaxFrames];
  // Called from the interposed function itself, one wrapper fewer than allocate()'s callers
  // (guard_alloc, then malloc) that config.skip_frames counts.
  const int skip = config_.skip_frames > 0 ? config_.skip_frames - 1 : 0;
  const int frame_count = capture(frames, config_.backtraces, skip);
  report_invalid_pointer(ptr, operation, frames, frame_count);
}

FreeResult GuardAllocator::deallocate(std::uintptr_t ptr, void* stream) noexcept {
  bool capturing = false;
  if (backend_.kind() != device::Kind::Host && backend_.is_capturing(stream, &capturing).ok() && capturing) {
    ReportWriter(kStderr).str("mate guard: ").str(capture_message(backend_.kind())).chr('\n');
    return FreeResult::Capturing;
  }
  void* frames[kMaxFrames];
  int frame_count = capture(frames, config_.backtraces, config_.skip_frames);

  Slot copy;
  std::uint32_t index;
  {
    std::lock_guard lock(table_->mutex);
    index = table_->index_find(ptr);
    Slot freed;
    if (index != kNoSlot && static_cast<State>(table_->slot(index).state.load()) == State::Live) {
      Slot& s = table_->slot(index);
      // Marked freed at once, so a racing second free of the same pointer is a double free.
      s.state.store(static_cast<std::uint8_t>(State::Quarantined), std::memory_order_release);
      s.free_tid = gettid();
      s.free_stack = table_->depot.put(frames, frame_count);
      copy.copy_allocation_from(s);
    } else if (index != kNoSlot || table_->find_quarantined(ptr, &freed)) {
      // Freed by a racing free still in progress (its slot), or quarantined (its record).
      if (index != kNoSlot) freed.copy_allocation_from(table_->slot(index));
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
      core::write_crash_context(kStderr);
      if (config_.on_corruption == OnCorruption::Abort) stop();
      return FreeResult::DoubleFree;
    }
  }
  if (index == kNoSlot) {
    {
      std::lock_guard lock(table_->mutex);
      table_->stats.invalid_frees += 1;
    }
    report_invalid_pointer(ptr, "free", frames, frame_count);
    return FreeResult::InvalidFree;
  }

  // A kernel still running could write the canary (or fault on the unmapped range) later.
  if (config_.sync_on_free) note_sync(backend_.synchronize());
  SlotCheck checked = check_slot(backend_, *table_, copy, "at free");
  const int bad = checked.bad;
  if (copy.mapped() != 0) backend_.unmap(copy.mapping(), copy.mapped());

  {
    std::lock_guard lock(table_->mutex);
    table_->stats.frees += 1;
    frees_since_map_refusal_ += 1;
    table_->stats.live -= 1;
    table_->stats.live_bytes -= copy.size;
    if (copy.mapped() == 0) live_unmapped_ -= 1;
    if (bad > 0) table_->stats.canary_failures += 1;
    if (!checked.unchecked.ok()) table_->stats.canary_unchecked += 1;
    Quarantine::Push pushed;
    // A full ring that cannot grow (no memory) makes room by evicting the oldest (FIFO).
    while ((pushed = table_->quarantine_push(index)) == Quarantine::Push::kNoRoom && evict_oldest_locked()) {
    }
    if (pushed == Quarantine::Push::kNoRoom) table_->drop(index);
    if (pushed == Quarantine::Push::kKept) {
      table_->stats.quarantined += 1;
      table_->stats.quarantined_bytes += copy.reserved();
    } else {
      // No record could describe it or be stored: released at once, as a range no report could
      // name would be.
      table_->stats.not_quarantined += 1;
      backend_.release(copy.reservation, copy.reserved());
      map_entries_since_count_ += 1;
    }
    // FIFO eviction: the oldest freed ranges give their address space back first. (A free leaves
    // live + quarantined unchanged: allocate() keeps that within max_allocations.)
    while (table_->stats.quarantined_bytes > quarantine_limit_ && evict_oldest_locked()) {
    }
  }
  if (config_.log_allocations) {
    ReportWriter w(kStderr);
    w.str("mate guard: free #").dec(copy.id()).str(" user ");
    write_range(w, copy.user, copy.size);
    w.str(" size ").dec(copy.size);
    if (bad > 0) {
      w.str(" canary CORRUPTED\n");
    } else if (!checked.unchecked.ok()) {
      w.str(" canary not checked: ");
      write_status(w, checked.unchecked);
      w.chr('\n');
    } else {
      w.str(" canary intact\n");
    }
  }
  if (bad > 0) {
    if (config_.on_corruption == OnCorruption::Abort) stop();
    return FreeResult::CanaryCorrupted;
  }
  return checked.unchecked.ok() ? FreeResult::Ok : FreeResult::CanaryNotChecked;
}

bool GuardAllocator::owns(std::uintptr_t ptr) const noexcept {
  // Most pointers a preloaded free() asks about are glibc's: answered without the lock.
  if (!may_hold(ptr)) return false;
  std::lock_guard lock(table_->mutex);
  return table_->index_contains(ptr);
}

bool GuardAllocator::may_hold(std::uintptr_t address) const noexcept {
  return address >= table_->lowest.load(std::memory_order_relaxed) &&
         address < table_->highest.load(std::memory_order_relaxed);
}

std::size_t GuardAllocator::size_of(std::uintptr_t ptr) const noexcept {
  std::lock_guard lock(table_->mutex);
  std::uint32_t i = table_->index_find(ptr);
  if (i == kNoSlot || static_cast<State>(table_->slot(i).state.load()) != State::Live) return 0;
  return table_->slot(i).size;
}

std::size_t GuardAllocator::check_all() noexcept {
  if (config_.sync_on_free) note_sync(backend_.synchronize());
  std::lock_guard lock(table_->mutex);
  std::size_t bad = 0;
  std::size_t unchecked = 0;
  for (std::uint32_t i = 0; i < table_->high_water(); ++i) {
    const Slot& s = table_->slot(i);
    if (static_cast<State>(s.state.load()) != State::Live) continue;
    SlotCheck checked = check_slot(backend_, *table_, s, "(check_all)");
    if (checked.bad > 0) {
      ++bad;
    } else if (!checked.unchecked.ok()) {
      ++unchecked;
    }
  }
  table_->stats.canary_failures += bad;
  table_->stats.canary_unchecked += unchecked;
  return bad + unchecked;
}

Description GuardAllocator::describe(std::uintptr_t address) const noexcept {
  // Under the lock, or a slot that another thread is filling or freeing could be read half
  // written. Only the fault handler reads without it (find_allocation): the faulting thread may
  // hold it.
  std::lock_guard lock(table_->mutex);
  return describe_in_table(*table_, backend_.granularity(), address);
}

void GuardAllocator::note_unguarded() noexcept {
  std::lock_guard lock(table_->mutex);
  table_->stats.unguarded += 1;
}

// The same order as check_all (mutex, then scratch_mutex inside check_slot): the opposite order
// would deadlock against a thread checking canaries while another forks.
void GuardAllocator::prepare_fork() noexcept {
  table_->mutex.lock();
  table_->scratch_mutex.lock();
}

void GuardAllocator::after_fork() noexcept {
  table_->scratch_mutex.unlock();
  table_->mutex.unlock();
}

Stats GuardAllocator::stats() const noexcept {
  std::lock_guard lock(table_->mutex);
  return table_->stats;
}

}  // namespace mate::guard
