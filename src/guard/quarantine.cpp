// Records in anonymous mappings; a full ring is copied into one an eighth larger.
#include "guard/quarantine.hpp"

#include <sys/mman.h>

namespace mate::guard {

namespace {

constexpr std::uint64_t kPage = 4096;

constexpr std::uint64_t bits(unsigned n) noexcept { return (std::uint64_t{1} << n) - 1; }

std::uintptr_t round_up(std::uintptr_t v, std::uintptr_t a) noexcept { return (v + a - 1) & ~(a - 1); }

bool same_allocation(const Slot& a, const Slot& b) noexcept {
  return a.reservation == b.reservation && a.reserved_units == b.reserved_units &&
         a.mapping_units == b.mapping_units && a.mapped_units == b.mapped_units && a.user == b.user &&
         a.size == b.size && a.mode == b.mode && a.id() == b.id() && a.alloc_tid == b.alloc_tid &&
         a.free_tid == b.free_tid && a.alloc_stack == b.alloc_stack && a.free_stack == b.free_stack;
}

}  // namespace

void decode(const QuarantineRecord& r, std::size_t granularity, Slot* out) noexcept {
  const std::uintptr_t g = granularity;
  const std::uintptr_t user = r.user;
  const std::size_t size = r.size;
  const std::uintptr_t a = r.align_log2 == 0 ? 0 : std::uintptr_t{1} << r.align_log2;
  const std::uintptr_t slide = a > g ? a - g : 0;
  const std::uintptr_t lead = ((std::uintptr_t{r.lead_high} << 16) | r.lead_low) * kPage;
  const std::uintptr_t reservation = (user & ~(kPage - 1)) - lead;
  std::uintptr_t mapping, mapped, reserved;
  // The placement GuardAllocator::allocate makes (allocator.hpp): [guard][slide][mapping][guard].
  if (size == 0) {
    mapped = 0;
    reserved = g + slide;
    mapping = slide == 0 ? reservation + g : round_up(reservation + g, a);
  } else {
    mapped = round_up(size, g);  // padded to min(a, g), which divides g
    mapping = user & ~(g - 1);
    reserved = mapped + 2 * g + slide;
  }
  out->set_placement(reservation, reserved, mapping, mapped);
  out->user = user;
  out->size = size;
  out->mode = r.mode != 0 ? Mode::Head : Mode::Tail;
  out->set_id(r.id);
  out->alloc_stack = static_cast<std::uint32_t>(r.alloc_stack);
  out->free_stack = static_cast<std::uint32_t>(r.free_stack);
  out->alloc_tid = static_cast<pid_t>(r.alloc_tid);
  out->free_tid = static_cast<pid_t>(r.free_tid);
  out->next = kNoSlot;
  out->state.store(static_cast<std::uint8_t>(State::Quarantined), std::memory_order_relaxed);
}

bool encode(const Slot& s, std::size_t granularity, QuarantineRecord* out) noexcept {
  const std::uintptr_t g = granularity;
  // The alignment is not kept in a Slot; the slide it made is: reserved - mapped - both guards.
  const std::size_t fixed = s.size == 0 ? g : s.mapped() + 2 * g;
  if (s.reserved() < fixed) return false;
  const std::size_t slide = s.reserved() - fixed;
  unsigned align_log2 = 0;
  if (slide != 0) {
    const std::size_t a = slide + g;
    if ((a & (a - 1)) != 0) return false;
    while ((std::size_t{1} << align_log2) < a) ++align_log2;
  }
  const std::uintptr_t page = s.user & ~(kPage - 1);
  if (page < s.reservation) return false;
  const std::uint64_t lead = (page - s.reservation) / kPage;
  if (s.user > bits(48) || s.size > bits(44) || lead > bits(25) || s.alloc_stack > bits(20) ||
      s.free_stack > bits(20) || s.alloc_tid < 0 || static_cast<std::uint64_t>(s.alloc_tid) > bits(22) ||
      s.free_tid < 0 || static_cast<std::uint64_t>(s.free_tid) > bits(22))
    return false;
  QuarantineRecord r{};
  r.user = s.user;
  r.align_log2 = align_log2;
  r.mode = s.mode == Mode::Head ? 1 : 0;
  r.lead_high = lead >> 16;
  r.lead_low = lead & bits(16);
  r.size = s.size;
  r.alloc_stack = s.alloc_stack;
  r.id = s.id();
  r.free_stack = s.free_stack;
  r.alloc_tid = static_cast<std::uint64_t>(s.alloc_tid);
  r.free_tid = static_cast<std::uint64_t>(s.free_tid);
  Slot back;
  decode(r, granularity, &back);
  if (!same_allocation(back, s)) return false;
  *out = r;
  return true;
}

Quarantine::~Quarantine() {
  const int n = rings_used_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) munmap(rings_[i].records, rings_[i].bytes);
}

bool Quarantine::grow() noexcept {
  const int n = rings_used_.load(std::memory_order_relaxed);
  if (n == max_rings_) return false;
  const Ring* old = n == 0 ? nullptr : &rings_[n - 1];
  std::size_t capacity = kPage / sizeof(QuarantineRecord);
  if (old != nullptr) capacity = old->capacity + old->capacity / 8;
  const std::size_t bytes = round_up(capacity * sizeof(QuarantineRecord), kPage);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  Ring& fresh = rings_[n];
  fresh.records = static_cast<QuarantineRecord*>(p);
  fresh.capacity = bytes / sizeof(QuarantineRecord);
  fresh.bytes = bytes;
  const std::uint64_t first = head(), end = tail();
  for (std::uint64_t seq = first; seq < end; ++seq)
    fresh.records[seq % fresh.capacity] = old->records[seq % old->capacity];
  rings_used_.store(n + 1, std::memory_order_release);
  // The old ring stays mapped for a fault handler still reading it, without costing memory: it
  // reads zeros from now on, skips them and scans again in this ring (scan()).
  if (old != nullptr) madvise(old->records, old->bytes, MADV_DONTNEED);
  return true;
}

Quarantine::Push Quarantine::push(const Slot& s, std::uint64_t* sequence) noexcept {
  QuarantineRecord r;
  if (!encode(s, granularity_, &r)) return Push::kNotEncodable;
  const int n = rings_used_.load(std::memory_order_relaxed);
  if ((n == 0 || size() == rings_[n - 1].capacity) && !grow()) return Push::kNoRoom;
  const Ring& ring = rings_[rings_used_.load(std::memory_order_relaxed) - 1];
  const std::uint64_t seq = tail();
  ring.records[seq % ring.capacity] = r;
  tail_.store(seq + 1, std::memory_order_release);
  *sequence = seq;
  return Push::kKept;
}

bool Quarantine::pop(Slot* out) noexcept {
  const std::uint64_t seq = head();
  if (seq == tail()) return false;
  get(seq, out);
  drop_oldest();
  return true;
}

void Quarantine::get(std::uint64_t sequence, Slot* out) const noexcept {
  const Ring& ring = rings_[rings_used_.load(std::memory_order_relaxed) - 1];
  decode(ring.records[sequence % ring.capacity], granularity_, out);
}

std::uintptr_t Quarantine::user_of(std::uint64_t sequence) const noexcept {
  const Ring& ring = rings_[rings_used_.load(std::memory_order_relaxed) - 1];
  return ring.records[sequence % ring.capacity].user;
}

std::uint64_t Quarantine::sequence_from_low_bits(std::uint32_t low) const noexcept {
  const std::uint64_t first = head();
  return first + ((low - static_cast<std::uint32_t>(first)) & kLowBitsMask);
}

}  // namespace mate::guard
