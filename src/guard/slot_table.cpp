// Fixed-capacity metadata in anonymous mappings (MAP_NORESERVE: only touched pages cost memory).
#include "guard/slot_table.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

namespace mate::guard {

namespace {

void* map_table(std::size_t bytes, const char* what) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    throw GuardError(std::string("guard allocator: cannot map its ") + what + " (" +
                     std::to_string(bytes) + " bytes): " + std::strerror(errno));
  }
  return p;
}

std::size_t hash(std::uintptr_t key) noexcept {
  std::uint64_t x = key;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<std::size_t>(x);
}

// Entry i pairs g_allocators[i] with g_tables[i]. An entry being filled holds kClaimed, which
// readers skip: two registrations racing for one entry must not both write its table.
std::atomic<GuardAllocator*> g_allocators[kMaxAllocators];
std::atomic<SlotTable*> g_tables[kMaxAllocators];
char g_claimed_tag;
GuardAllocator* const kClaimed = reinterpret_cast<GuardAllocator*>(&g_claimed_tag);

}  // namespace

SlotTable::SlotTable(std::size_t capacity, std::size_t granularity) : capacity_(capacity), quarantine_(granularity) {
  // Slot numbers (+ 1) share index entries with kQuarantineTag.
  if (capacity == 0 || capacity >= kQuarantineTag - 1)
    throw GuardError("guard allocator: max_allocations must be between 1 and 2^31-2, got " +
                     std::to_string(capacity));
  // Starts small: a table sized for max_allocations would be touched all over by the hash and
  // cost resident memory in every process that makes only a few allocations.
  index_capacity_ = 1024;
  slots_ = static_cast<Slot*>(map_table(capacity * sizeof(Slot), "allocation table"));
  entries_ = static_cast<std::uint32_t*>(map_table(index_capacity_ * sizeof(std::uint32_t), "pointer index"));
  scratch = static_cast<unsigned char*>(map_table(kScratchBytes, "canary staging buffer"));
}

SlotTable::~SlotTable() {
  munmap(slots_, capacity_ * sizeof(Slot));
  munmap(entries_, index_capacity_ * sizeof(std::uint32_t));
  munmap(scratch, kScratchBytes);
}

std::uint32_t SlotTable::take_free() noexcept {
  if (free_head_ != kNoSlot) {
    std::uint32_t i = free_head_;
    free_head_ = slots_[i].next;
    return i;
  }
  std::uint32_t hw = high_water_.load(std::memory_order_relaxed);
  if (hw >= capacity_) return kNoSlot;
  // Published before the slot is filled; the handler ignores slots whose state is None.
  high_water_.store(hw + 1, std::memory_order_release);
  return hw;
}

void SlotTable::put_free(std::uint32_t index) noexcept {
  slots_[index].state.store(static_cast<std::uint8_t>(State::None), std::memory_order_release);
  slots_[index].next = free_head_;
  free_head_ = index;
}

void SlotTable::grow_index() noexcept {
  const std::size_t bigger = index_capacity_ * 2;
  void* e = mmap(nullptr, bigger * sizeof(std::uint32_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (e == MAP_FAILED) {
    // Keep the current table: it still works, only with longer probes (it is never full, as
    // capacity_ slots need at most capacity_ entries and growth starts at three quarters).
    return;
  }
  auto* old_entries = entries_;
  const std::size_t old_capacity = index_capacity_;
  entries_ = static_cast<std::uint32_t*>(e);
  index_capacity_ = bigger;
  index_used_ = 0;
  for (std::size_t i = 0; i < old_capacity; ++i)
    if (old_entries[i] != 0) insert_entry(old_entries[i]);
  munmap(old_entries, old_capacity * sizeof(std::uint32_t));
}

std::uintptr_t SlotTable::user_of_entry(std::uint32_t entry) const noexcept {
  if ((entry & kQuarantineTag) == 0) return slots_[entry - 1].user;
  return quarantine_.user_of(quarantine_.sequence_from_low_bits(entry & Quarantine::kLowBitsMask));
}

void SlotTable::insert_entry(std::uint32_t entry) noexcept {
  const std::uintptr_t user = user_of_entry(entry);
  std::size_t mask = index_capacity_ - 1;
  for (std::size_t i = hash(user) & mask;; i = (i + 1) & mask) {
    if (entries_[i] == 0 || key(i) == user) {
      if (entries_[i] == 0) ++index_used_;
      entries_[i] = entry;
      return;
    }
  }
}

bool SlotTable::index_insert(std::uint32_t index) noexcept {
  // At most three quarters full: short probes (each reads a slot or record) without doubling
  // the table's memory for the last few thousand quarantined allocations.
  if (4 * (index_used_ + 1) > 3 * index_capacity_) grow_index();
  if (index_used_ + 2 > index_capacity_) return false;  // growth failed; never fill the table
  insert_entry(index + 1);
  return true;
}

std::size_t SlotTable::find_entry(std::uintptr_t user) const noexcept {
  std::size_t mask = index_capacity_ - 1;
  for (std::size_t i = hash(user) & mask; entries_[i] != 0; i = (i + 1) & mask) {
    if (key(i) == user) return i;
  }
  return kNoEntry;
}

std::uint32_t SlotTable::index_find(std::uintptr_t user) const noexcept {
  const std::size_t i = find_entry(user);
  if (i == kNoEntry || (entries_[i] & kQuarantineTag) != 0) return kNoSlot;
  return entries_[i] - 1;
}

bool SlotTable::find_quarantined(std::uintptr_t user, Slot* out) const noexcept {
  const std::size_t i = find_entry(user);
  if (i == kNoEntry || (entries_[i] & kQuarantineTag) == 0) return false;
  quarantine_.get(quarantine_.sequence_from_low_bits(entries_[i] & Quarantine::kLowBitsMask), out);
  return true;
}

void SlotTable::index_erase(std::uintptr_t user) noexcept {
  // Backward-shift deletion keeps every remaining key reachable from its home bucket.
  std::size_t mask = index_capacity_ - 1;
  std::size_t i = hash(user) & mask;
  while (entries_[i] != 0 && key(i) != user) i = (i + 1) & mask;
  if (entries_[i] == 0) return;
  for (std::size_t j = (i + 1) & mask; entries_[j] != 0; j = (j + 1) & mask) {
    std::size_t home = hash(key(j)) & mask;
    // Move j into the hole at i when its home is not in the cyclic range (i, j].
    bool home_in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (!home_in_range) {
      entries_[i] = entries_[j];
      i = j;
    }
  }
  entries_[i] = 0;
  --index_used_;
}

Quarantine::Push SlotTable::quarantine_push(std::uint32_t index) noexcept {
  const Slot& s = slots_[index];
  const std::size_t i = find_entry(s.user);
  std::uint64_t sequence = 0;
  const Quarantine::Push pushed = i == kNoEntry ? Quarantine::Push::kNotEncodable : quarantine_.push(s, &sequence);
  if (pushed == Quarantine::Push::kNoRoom) return pushed;
  // The record is published before the slot is freed: the fault handler, which reads the slots
  // first, finds the allocation in one or the other.
  if (pushed == Quarantine::Push::kKept) {
    entries_[i] = kQuarantineTag | (static_cast<std::uint32_t>(sequence) & Quarantine::kLowBitsMask);
    put_free(index);
  } else {
    drop(index);
  }
  return pushed;
}

void SlotTable::drop(std::uint32_t index) noexcept {
  index_erase(slots_[index].user);
  put_free(index);
}

bool SlotTable::quarantine_pop(Slot* out) noexcept {
  if (quarantine_.size() == 0) return false;
  // Unindexed while its sequence number still resolves (it is the head).
  quarantine_.get(quarantine_.head(), out);
  index_erase(out->user);
  quarantine_.drop_oldest();
  return true;
}

void register_allocator(GuardAllocator* allocator, SlotTable* table) noexcept {
  for (int i = 0; i < kMaxAllocators; ++i) {
    GuardAllocator* expected = nullptr;
    if (!g_allocators[i].compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) continue;
    // The table is published before the allocator, so a reader never sees a half entry.
    g_tables[i].store(table, std::memory_order_release);
    g_allocators[i].store(allocator, std::memory_order_release);
    return;
  }
}

void unregister_allocator(GuardAllocator* allocator) noexcept {
  for (int i = 0; i < kMaxAllocators; ++i) {
    GuardAllocator* expected = allocator;
    if (g_allocators[i].compare_exchange_strong(expected, nullptr)) return;
  }
}

int registered_allocators(Registered* out, int cap) noexcept {
  int n = 0;
  for (int i = 0; i < kMaxAllocators && n < cap; ++i) {
    GuardAllocator* a = g_allocators[i].load(std::memory_order_acquire);
    if (a == nullptr || a == kClaimed) continue;
    SlotTable* t = g_tables[i].load(std::memory_order_acquire);
    // Still `a`'s entry: not unregistered and taken by another allocator while the table was read.
    if (g_allocators[i].load(std::memory_order_acquire) != a) continue;
    out[n++] = Registered{a, t};
  }
  return n;
}

}  // namespace mate::guard
