// The allocator core: placement, canaries, quarantine, free-time checks. Platform work goes
// through device::Backend; metadata through SlotTable; the map-entry budget through
// MapEntryBudget; reports through allocator_reports.cpp and ReportWriter.
#include "mate/guard/allocator.hpp"

#include <unistd.h>

#include <cstring>
#include <string>

#include "guard/allocator_reports.hpp"
#include "mate/device/vendors.hpp"
#include "guard/canary.hpp"
#include "guard/lookup.hpp"
#include "guard/platform/map_entry_budget.hpp"
#include "guard/slot_table.hpp"
#include "guard/stack/stack_capture.hpp"

namespace mate::guard {

namespace {

bool is_power_of_two(std::size_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }

// round_up(v, a) for a power of two a; false on overflow.
bool round_up(std::size_t v, std::size_t a, std::size_t* out) noexcept {
  if (v > SIZE_MAX - (a - 1)) return false;
  *out = (v + a - 1) & ~(a - 1);
  return true;
}

const char* capture_message(device::Kind kind) noexcept {
  const device::Vendor* v = device::find_vendor(kind);
  return v != nullptr ? v->guard_graph_capture_refusal : "guard allocator debug mode does not support graph capture";
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

}  // namespace

// Placement (see the header): [guard g][mapping d][guard g], or one unmapped granule for 0 bytes.
// An alignment above the granularity over-reserves a - g bytes, so the mapping can slide until
// its start (the user pointer) falls on a multiple of a; the slack stays unmapped and widens the
// guard on one side. The size is padded to the alignment, but to the granularity at most: the
// mapping's start is aligned already, and padding a 10-byte allocation aligned to 256 MiB to
// 256 MiB would make all of it resident canary.
struct GuardAllocator::Placement {
  std::size_t g = 0;         // the backend's granularity
  std::size_t a = 0;         // the alignment
  std::size_t slide = 0;     // a - g when a > g: how far the mapping may slide
  std::size_t rounded = 0;   // the size padded to min(a, g)
  std::size_t mapped = 0;    // rounded padded to g (0 for 0 bytes)
  std::size_t reserved = 0;  // the mapping, both guards and the slide

  // Fills the sizes for `size` bytes; an error result when they overflow or pass a slot's limit.
  AllocResult plan(std::size_t size) noexcept {
    slide = a > g ? a - g : 0;
    const std::size_t pad_to = a > g ? g : a;
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
    return {};
  }
  // Where the mapping goes in a reservation at `b`: right after the leading guard, or slid up
  // (by less than a) to the first multiple of a. round_up cannot overflow here: the reservation
  // extends past the aligned point.
  std::uintptr_t mapping_at(std::uintptr_t b) const noexcept {
    std::size_t aligned = b + g;
    if (slide != 0) (void)round_up(b + g, a, &aligned);
    return static_cast<std::uintptr_t>(aligned);
  }
  // The user pointer in a reservation at `b`.
  std::uintptr_t user_at(std::uintptr_t b, Mode mode) const noexcept {
    std::uintptr_t user = b;  // zero bytes: the start of an unmapped granule
    if (mapped == 0 && slide != 0) (void)round_up(b, a, &user);
    if (mapped != 0) user = mode == Mode::Tail ? mapping_at(b) + mapped - rounded : mapping_at(b);
    return user;
  }
};

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
  // Not pinned (a driver without the call, or page-locked memory refused): copies are slower.
  if (backend.kind() != device::Kind::Host)
    table_->scratch_pinned = backend.pin_host(table_->scratch, SlotTable::kScratchBytes).ok();
  if (config.map_entry_limit != 0)
    map_budget_ = new MapEntryBudget(config.map_entry_limit, config.low_priority_entry_limit);
  // The crash handler is not installed here: install_guard_allocator() (or whoever constructs
  // an allocator and wants its faults reported) calls install_fault_handler().
  register_allocator(this, table_);
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
  if (table_->scratch_pinned) backend_.unpin_host(table_->scratch);
  free_pattern_image();
  delete map_budget_;
  delete table_;
}

// Gives the oldest quarantined allocation's address space back (under table_->mutex); false
// when the quarantine is empty.
bool GuardAllocator::evict_oldest_locked() noexcept {
  Slot s;
  if (!table_->quarantine_pop(&s)) return false;
  backend_.release(s.reservation, s.reserved());
  if (map_budget_ != nullptr) map_budget_->note_range_released_locked();
  table_->stats.quarantined -= 1;
  table_->stats.quarantined_bytes -= s.reserved();
  return true;
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

// Reserves and maps `p` at *base. On failure: NoMemory when this request is too large for what is
// left (a small guarded-shape mapping still works), else MappingRefused once a retry after
// emptying the quarantine fails too.
AllocResult GuardAllocator::reserve_and_map(const Placement& p, std::uintptr_t* base) noexcept {
  const auto attempt = [&] {
    device::Status status = backend_.reserve(p.reserved, base);
    if (status.ok() && p.mapped != 0) {
      status = backend_.map(p.mapping_at(*base), p.mapped);
      if (!status.ok()) backend_.release(*base, p.reserved);
    }
    return status;
  };
  device::Status status = attempt();
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
    if (released > 0) status = attempt();
  }
  if (!status.ok()) {
    say_mapping_refused(&status);
    return {0, AllocError::MappingRefused, "guard allocator: the system refused another mapping"};
  }
  for (std::uintptr_t lo = table_->lowest.load(); *base < lo && !table_->lowest.compare_exchange_weak(lo, *base);) {
  }
  for (std::uintptr_t hi = table_->highest.load();
       *base + p.reserved > hi && !table_->highest.compare_exchange_weak(hi, *base + p.reserved);) {
  }
  return {};
}

// Fills both canary sides of the allocation at `user`; on failure gives its reservation back.
AllocResult GuardAllocator::write_canaries(const Placement& p, std::uintptr_t base, std::uintptr_t user,
                                           std::size_t size) noexcept {
  if (p.mapped == 0) return {};
  Slot probe{};
  probe.set_placement(base, p.reserved, p.mapping_at(base), p.mapped);
  probe.user = user;
  probe.size = size;
  const CanaryRanges ranges = canary_ranges(probe);
  device::Status written;
  if (backend_.kind() == device::Kind::Host) {  // plain memory, written in place: cannot fail
    write_canary(backend_, ranges.before, ranges.before_bytes, table_->scratch, SlotTable::kScratchBytes);
    written = write_canary(backend_, ranges.after, ranges.after_bytes, table_->scratch, SlotTable::kScratchBytes);
  } else {
    written = write_device_canaries(ranges);  // device_canary.cpp
  }
  if (!written.ok()) {
    backend_.unmap(p.mapping_at(base), p.mapped);
    backend_.release(base, p.reserved);
    return {0, AllocError::BackendError, "guard allocator: writing the canary failed"};
  }
  return {};
}

// Takes a slot for the allocation and marks it live (its id in *id); on failure (the table is
// full) gives its reservation back.
AllocResult GuardAllocator::record_live(const Placement& p, std::uintptr_t base, std::uintptr_t user,
                                        std::size_t size, void* const* frames, int frame_count,
                                        std::uint64_t* id) noexcept {
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
    if (p.mapped != 0) backend_.unmap(p.mapping_at(base), p.mapped);
    backend_.release(base, p.reserved);
    return {0, AllocError::TableFull, "guard allocator: max_allocations allocations are live; raise max_allocations"};
  }
  Slot& s = table_->slot(index);
  *id = table_->next_id++ & Slot::kIdMask;  // as reports and free lines show it
  s.set_id(*id);
  s.set_placement(base, p.reserved, p.mapping_at(base), p.mapped);
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
  if (map_budget_ != nullptr) map_budget_->note_allocated_locked(p.mapped == 0);
  return {};
}

// config.log_allocations' line for a new allocation.
void GuardAllocator::log_allocation(const Placement& p, std::uintptr_t base, std::uintptr_t user, std::size_t size,
                                    std::uint64_t id) noexcept {
  const std::uintptr_t mapping = p.mapping_at(base);
  ReportWriter w(kStderr);
  w.str("mate guard: alloc #").dec(id).str(" user ");
  write_range(w, user, size);
  w.str(" size ").dec(size).str(" mode ").str(to_string(config_.mode)).str(" ").str(backend_.name()).str(" guard ");
  if (p.mapped == 0) {
    write_range(w, base, p.reserved);
  } else if (config_.mode == Mode::Tail) {
    write_range(w, mapping + p.mapped, base + p.reserved - (mapping + p.mapped));
  } else {
    write_range(w, base, mapping - base);
  }
  w.chr('\n');
}

AllocResult GuardAllocator::allocate(std::size_t size, std::size_t alignment, void* stream, Priority priority) noexcept {
  Placement p;
  p.g = backend_.granularity();
  p.a = alignment == 0 ? backend_.default_alignment() : alignment;
  if (!is_power_of_two(p.a))
    return {0, AllocError::BadAlignment, "guard allocator: alignment must be a power of two"};
  bool capturing = false;
  if (backend_.kind() != device::Kind::Host && backend_.is_capturing(stream, &capturing).ok() && capturing)
    return {0, AllocError::Capturing, capture_message(backend_.kind())};
  if (AllocResult planned = p.plan(size); !planned) return planned;

  const bool low = priority == Priority::Low;
  if (map_budget_ != nullptr &&
      !map_budget_->admit(*table_, low,
                          [](void* self) noexcept { return static_cast<GuardAllocator*>(self)->evict_oldest_locked(); },
                          this)) {
    if (low) say_low_priority_share_used();
    else say_mapping_refused(nullptr);
    return {0, AllocError::OverBudget, "guard allocator: its share of the memory map entries is used up for now"};
  }
  // Once this allocation's mappings are made or given up (on every return below), a count sees
  // them: it no longer needs to add them.
  struct InFlight {
    MapEntryBudget* budget;
    ~InFlight() {
      if (budget != nullptr) budget->end_allocation();
    }
  } in_flight{map_budget_};

  void* frames[kMaxFrames];
  int frame_count = capture(frames, config_.backtraces, config_.skip_frames);

  std::uintptr_t base = 0;
  if (AllocResult mapped = reserve_and_map(p, &base); !mapped) return mapped;
  const std::uintptr_t user = p.user_at(base, config_.mode);
  if (AllocResult filled = write_canaries(p, base, user, size); !filled) return filled;
  std::uint64_t id = 0;
  if (AllocResult recorded = record_live(p, base, user, size, frames, frame_count, &id); !recorded) return recorded;
  if (config_.log_allocations) log_allocation(p, base, user, size, id);
  return {user, AllocError::None, nullptr};
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
      return report_double_free(ptr, freed, frames, frame_count);
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
    table_->stats.live -= 1;
    table_->stats.live_bytes -= copy.size;
    if (map_budget_ != nullptr) map_budget_->note_freed_locked(copy.mapped() == 0);
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
      if (map_budget_ != nullptr) map_budget_->note_range_released_locked();
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
    write_outcome(config_.outcome_fd, copy, checked);
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
