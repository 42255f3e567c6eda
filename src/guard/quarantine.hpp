// The quarantine: freed allocations whose address ranges stay reserved and inaccessible, oldest
// first out, each described by a 32-byte record (a live allocation's Slot is 64 bytes). With the
// default 64 MiB budget a program keeps thousands of them: their records are most of the
// allocator's own memory (bench/README.md "guard").
//
// A record keeps what a use-after-free or double-free report needs (id, size, user range, mode,
// placement, both stacks and threads) in bit fields. The placement is not stored but recomputed
// from the user pointer, the size and the alignment the reservation was made for; encode() checks
// that the record reads back as the allocation it was given, and refuses it otherwise (an
// alignment or address beyond the fields' range), so a record never describes the wrong range.
//
// Records live in a ring that grows (by an eighth, into a new anonymous mapping) when full, so
// the pages touched follow the most records ever held. Sequence numbers name records: the oldest
// is head(), the next pushed gets tail(). push/pop/get run under the owning SlotTable's mutex;
// the fault handler reads records without it (racy but never dangling: a replaced ring stays
// mapped, its pages given back, until the quarantine is destroyed).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "guard/slot.hpp"

namespace mate::guard {

struct QuarantineRecord {
  std::uint64_t user : 48;
  std::uint64_t align_log2 : 6;  // the alignment the reservation was made for (0: at most the granule)
  std::uint64_t mode : 1;
  std::uint64_t lead_high : 9;  // lead: 4 KiB units from the reservation to the user pointer's page
  std::uint64_t size : 44;      // < 16 TiB, the largest reservation
  std::uint64_t alloc_stack : 20;
  std::uint64_t id : 48;
  std::uint64_t lead_low : 16;
  std::uint64_t free_stack : 20;
  std::uint64_t alloc_tid : 22;  // Linux thread ids are below 2^22 (PID_MAX_LIMIT)
  std::uint64_t free_tid : 22;
};
static_assert(sizeof(QuarantineRecord) == 32, "a quarantined allocation's record should stay small");

// Encodes `s` for a backend of granule `granularity`; false when the record would not read back
// as `s` exactly.
bool encode(const Slot& s, std::size_t granularity, QuarantineRecord* out) noexcept;
// Fills `out` (state Quarantined) from `r`.
void decode(const QuarantineRecord& r, std::size_t granularity, Slot* out) noexcept;

class Quarantine {
 public:
  // A ring is never changed once published (the current one is the last); replaced ones stay
  // mapped until the destructor. 192 growths by an eighth from one page exceed 2^31 records.
  static constexpr int kMaxRings = 192;
  // `max_rings` below the default only in tests (a ring that cannot grow).
  explicit Quarantine(std::size_t granularity, int max_rings = kMaxRings) noexcept
      : granularity_(granularity), max_rings_(max_rings < kMaxRings ? max_rings : kMaxRings) {}
  ~Quarantine();
  Quarantine(const Quarantine&) = delete;
  Quarantine& operator=(const Quarantine&) = delete;

  enum class Push { kKept, kNotEncodable, kNoRoom };
  // Under the table's mutex:
  // Appends `s`. kNoRoom: the ring is full and cannot grow (no memory); popping the oldest makes
  // room.
  Push push(const Slot& s, std::uint64_t* sequence) noexcept;
  // Removes the oldest into `out`; false when empty.
  bool pop(Slot* out) noexcept;
  // Removes the oldest (the quarantine is not empty).
  void drop_oldest() noexcept { head_.store(head() + 1, std::memory_order_release); }
  std::uint64_t head() const noexcept { return head_.load(std::memory_order_relaxed); }
  std::uint64_t tail() const noexcept { return tail_.load(std::memory_order_relaxed); }
  std::size_t size() const noexcept { return static_cast<std::size_t>(tail() - head()); }
  // The record with `sequence` (head() <= sequence < tail()).
  void get(std::uint64_t sequence, Slot* out) const noexcept;
  std::uintptr_t user_of(std::uint64_t sequence) const noexcept;
  // The full sequence number whose low 31 bits are `low` (an index entry's).
  std::uint64_t sequence_from_low_bits(std::uint32_t low) const noexcept;

  // Index entries keep the low 31 bits of a sequence number (the quarantine never holds 2^31).
  static constexpr std::uint32_t kLowBitsMask = 0x7fffffffu;

  // Without the lock (async-signal-safe): calls fn(const Slot&) for each record, newest first,
  // until it returns true. Returns false when the ring was replaced during the scan: the old one
  // reads as zeros from then on (its pages given back) or as records since evicted, so what fn
  // saw may be wrong and the caller starts over.
  template <typename Fn>
  bool scan(Fn fn) const noexcept {
    const int n = rings_used_.load(std::memory_order_acquire);
    if (n == 0) return true;
    const Ring& ring = rings_[n - 1];
    const std::uint64_t first = head_.load(std::memory_order_acquire);
    for (std::uint64_t seq = tail_.load(std::memory_order_acquire); seq-- > first;) {
      Slot s;
      decode(ring.records[seq % ring.capacity], granularity_, &s);
      if (s.user == 0) continue;  // zeros: no allocation is at address 0
      if (fn(s)) break;
    }
    // As a seqlock reader: the records' loads complete before the check.
    std::atomic_thread_fence(std::memory_order_acquire);
    return rings_used_.load(std::memory_order_relaxed) == n;
  }

 private:
  struct Ring {
    QuarantineRecord* records;
    std::size_t capacity;  // records
    std::size_t bytes;     // of the mapping
  };
  bool grow() noexcept;

  std::size_t granularity_;
  int max_rings_;
  Ring rings_[kMaxRings] = {};
  std::atomic<int> rings_used_{0};
  std::atomic<std::uint64_t> head_{0};
  std::atomic<std::uint64_t> tail_{0};
};

}  // namespace mate::guard
