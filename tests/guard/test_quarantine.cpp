// The quarantine's 32-byte records (src/guard/quarantine.hpp): every placement the allocator
// makes reads back exactly after the free, values at the fields' limits round-trip, what does not
// fit is refused (and then released at once, never mis-described), and the ring keeps FIFO order
// and its index entries across growth.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "guard/quarantine.hpp"
#include "guard/slot_table.hpp"
#include "mate/guard/allocator.hpp"

namespace {

using mate::guard::Description;
using mate::guard::GuardAllocator;
using mate::guard::GuardAllocatorConfig;
using mate::guard::kNoSlot;
using mate::guard::Mode;
using mate::guard::Quarantine;
using mate::guard::QuarantineRecord;
using mate::guard::Slot;
using mate::guard::SlotTable;
using mate::guard::State;

const std::size_t kPage = 4096;

void expect_same_placement(const Description& live, const Description& freed, const char* what) {
  EXPECT_EQ(freed.state, State::Quarantined) << what;
  EXPECT_EQ(freed.id, live.id) << what;
  EXPECT_EQ(freed.user, live.user) << what;
  EXPECT_EQ(freed.size, live.size) << what;
  EXPECT_EQ(freed.reservation, live.reservation) << what;
  EXPECT_EQ(freed.reserved, live.reserved) << what;
  EXPECT_EQ(freed.mapping, live.mapping) << what;
  EXPECT_EQ(freed.mapped, live.mapped) << what;
  EXPECT_EQ(freed.mode, live.mode) << what;
}

// What describe() says of an allocation while live, it says of its record once freed.
TEST(Quarantine, EveryPlacementReadsBackAfterTheFree) {
  for (Mode mode : {Mode::Tail, Mode::Head}) {
    GuardAllocatorConfig c;
    c.mode = mode;
    c.max_allocations = 4096;
    c.on_corruption = mate::guard::OnCorruption::Continue;
    GuardAllocator g(mate::device::host_backend(), c);
    for (std::size_t align : {std::size_t{0}, std::size_t{1}, std::size_t{64}, kPage, 2 * kPage, 16 * kPage,
                              std::size_t{1} << 21}) {
      for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{17}, kPage - 1, kPage, kPage + 1,
                               std::size_t{65537}}) {
        auto r = g.allocate(size, align);
        ASSERT_TRUE(r) << r.message;
        const Description live = g.describe(r.ptr);
        ASSERT_EQ(g.deallocate(r.ptr), mate::guard::FreeResult::Ok);
        const Description freed = g.describe(r.ptr);
        std::string what = std::string(mode == Mode::Tail ? "tail" : "head") + " size " + std::to_string(size) +
                           " align " + std::to_string(align);
        ASSERT_TRUE(freed.found) << what;
        expect_same_placement(live, freed, what.c_str());
      }
    }
    EXPECT_EQ(g.stats().quarantined, 49u);  // every one kept
  }
}

void slot_at_limits(Slot& s) {
  // A 2 MiB-granule device placement with a 1 GiB alignment: the mapping slid up by 3 granules.
  const std::uintptr_t g = std::size_t{2} << 20;
  const std::uintptr_t a = std::size_t{1} << 30;
  const std::uintptr_t reservation = (std::uintptr_t{1} << 47) - (std::uintptr_t{64} << 30);
  const std::uintptr_t mapping = reservation + g + 3 * g;
  const std::size_t size = (std::size_t{1} << 40) + 5;
  const std::size_t mapped = ((size + g - 1) / g) * g;  // padded to the granule, not to a
  s.set_placement(reservation, mapped + 2 * g + (a - g), mapping, mapped);
  s.user = mapping;
  s.size = size;
  s.mode = Mode::Head;
  s.set_id((std::uint64_t{1} << 48) - 1);
  s.alloc_stack = (1u << 20) - 1;
  s.free_stack = 1u << 18;
  s.alloc_tid = (1 << 22) - 1;
  s.free_tid = 1;
}

TEST(Quarantine, ValuesAtTheFieldLimitsRoundTrip) {
  Slot s;
  slot_at_limits(s);
  QuarantineRecord r;
  ASSERT_TRUE(mate::guard::encode(s, std::size_t{2} << 20, &r));
  Slot back;
  mate::guard::decode(r, std::size_t{2} << 20, &back);
  EXPECT_EQ(back.reservation, s.reservation);
  EXPECT_EQ(back.reserved(), s.reserved());
  EXPECT_EQ(back.mapping(), s.mapping());
  EXPECT_EQ(back.mapped(), s.mapped());
  EXPECT_EQ(back.user, s.user);
  EXPECT_EQ(back.size, s.size);
  EXPECT_EQ(back.mode, Mode::Head);
  EXPECT_EQ(back.id(), s.id());
  EXPECT_EQ(back.alloc_stack, s.alloc_stack);
  EXPECT_EQ(back.free_stack, s.free_stack);
  EXPECT_EQ(back.alloc_tid, s.alloc_tid);
  EXPECT_EQ(back.free_tid, s.free_tid);
  EXPECT_EQ(static_cast<State>(back.state.load()), State::Quarantined);
}

TEST(Quarantine, WhatDoesNotFitIsRefused) {
  const std::size_t g = std::size_t{2} << 20;
  QuarantineRecord r;
  {
    Slot s;
    slot_at_limits(s);
    s.alloc_tid = 1 << 22;  // above Linux's thread ids
    EXPECT_FALSE(mate::guard::encode(s, g, &r));
  }
  {
    Slot s;
    slot_at_limits(s);
    s.user += std::uintptr_t{1} << 48;  // beyond 48-bit addresses
    s.reservation += std::uintptr_t{1} << 48;
    EXPECT_FALSE(mate::guard::encode(s, g, &r));
  }
  {
    Slot s;
    slot_at_limits(s);
    s.alloc_stack = 1u << 20;
    EXPECT_FALSE(mate::guard::encode(s, g, &r));
  }
  {
    // A placement the allocator never makes (the mapping not where the user pointer implies)
    // must not read back as another one.
    Slot s;
    slot_at_limits(s);
    s.set_placement(s.reservation, s.reserved(), s.mapping() + g, s.mapped());
    EXPECT_FALSE(mate::guard::encode(s, g, &r));
  }
  {
    // A slide that is no alignment's.
    Slot s;
    slot_at_limits(s);
    s.set_placement(s.reservation, s.reserved() + g, s.mapping(), s.mapped());
    EXPECT_FALSE(mate::guard::encode(s, g, &r));
  }
}

void host_slot(Slot& s, std::uintptr_t reservation, std::uint64_t id) {
  s.set_placement(reservation, 3 * kPage, reservation + kPage, kPage);
  s.user = reservation + 2 * kPage - 16;
  s.size = 10;
  s.mode = Mode::Tail;
  s.set_id(id);
  s.alloc_tid = 7;
  s.free_tid = 8;
  s.alloc_stack = 3;
  s.free_stack = 4;
}

// Thousands of records: the ring grows many times and stays first in, first out.
TEST(Quarantine, TheRingKeepsFifoOrderAcrossGrowth) {
  Quarantine q(kPage);
  const std::uintptr_t base = std::uintptr_t{1} << 40;
  constexpr int kRecords = 5000;
  for (int i = 0; i < kRecords; ++i) {
    std::uint64_t seq = 0;
    Slot s;
    host_slot(s, base + 4 * kPage * static_cast<std::uintptr_t>(i), i + 1);
    ASSERT_EQ(q.push(s, &seq), Quarantine::Push::kKept);
    ASSERT_EQ(seq, static_cast<std::uint64_t>(i));
    if (i % 3 == 2) {  // pops interleaved with pushes move the head across the ring's end
      Slot oldest;
      ASSERT_TRUE(q.pop(&oldest));
      ASSERT_EQ(oldest.id(), static_cast<std::uint64_t>(i / 3 + 1));
    }
  }
  EXPECT_EQ(q.size(), static_cast<std::size_t>(kRecords - kRecords / 3));
  for (std::uint64_t seq = q.head(); seq < q.tail(); ++seq) {
    EXPECT_EQ(q.sequence_from_low_bits(static_cast<std::uint32_t>(seq) & Quarantine::kLowBitsMask), seq);
    Slot s;
    q.get(seq, &s);
    ASSERT_EQ(s.id(), seq + 1);
    ASSERT_EQ(q.user_of(seq), s.user);
  }
  int scanned = 0;
  std::uint64_t previous = UINT64_MAX;
  q.scan([&](const Slot& s) {
    EXPECT_LT(s.id(), previous);  // newest first
    previous = s.id();
    ++scanned;
    return false;
  });
  EXPECT_EQ(scanned, kRecords - kRecords / 3);
  for (std::uint64_t expected = q.head() + 1; q.size() > 0; ++expected) {
    Slot s;
    ASSERT_TRUE(q.pop(&s));
    ASSERT_EQ(s.id(), expected);
  }
  Slot none;
  EXPECT_FALSE(q.pop(&none));
}

// A ring that cannot grow (here: allowed one ring of one page) says so, and popping the oldest
// makes room (GuardAllocator::deallocate then evicts and retries).
TEST(Quarantine, AFullRingThatCannotGrowAsksForRoom) {
  Quarantine q(kPage, 1);
  const std::uintptr_t base = std::uintptr_t{1} << 40;
  const std::size_t per_page = kPage / sizeof(QuarantineRecord);
  std::uint64_t seq = 0;
  for (std::size_t i = 0; i < per_page; ++i) {
    Slot s;
    host_slot(s, base + 4 * kPage * i, i + 1);
    ASSERT_EQ(q.push(s, &seq), Quarantine::Push::kKept) << i;
  }
  Slot more;
  host_slot(more, base + 4 * kPage * per_page, per_page + 1);
  EXPECT_EQ(q.push(more, &seq), Quarantine::Push::kNoRoom);
  Slot oldest;
  ASSERT_TRUE(q.pop(&oldest));
  EXPECT_EQ(oldest.id(), 1u);
  EXPECT_EQ(q.push(more, &seq), Quarantine::Push::kKept);
  EXPECT_EQ(q.size(), per_page);
}

// The index finds a quarantined pointer through its record (a double free) after the ring grew,
// and a slot whose record cannot be kept is unindexed.
TEST(Quarantine, TheTableIndexesRecordsAndDropsWhatCannotBeKept) {
  SlotTable table(64, kPage);
  std::lock_guard lock(table.mutex);
  const std::uintptr_t base = std::uintptr_t{1} << 40;
  std::vector<std::uintptr_t> users;
  for (int i = 0; i < 1000; ++i) {
    const std::uint32_t index = table.take_free();
    ASSERT_NE(index, kNoSlot);
    Slot& s = table.slot(index);
    host_slot(s, base + 4 * kPage * static_cast<std::uintptr_t>(i), i + 1);
    s.state.store(static_cast<std::uint8_t>(State::Quarantined));
    ASSERT_TRUE(table.index_insert(index));
    if (i == 500) s.free_tid = 1 << 22;  // cannot be encoded
    users.push_back(s.user);
    EXPECT_EQ(table.quarantine_push(index),
              i != 500 ? Quarantine::Push::kKept : Quarantine::Push::kNotEncodable) << i;
  }
  EXPECT_EQ(table.quarantined(), 999u);
  for (int i = 0; i < 1000; ++i) {
    Slot s;
    EXPECT_EQ(table.index_find(users[i]), kNoSlot);
    EXPECT_EQ(table.find_quarantined(users[i], &s), i != 500) << i;
    EXPECT_EQ(table.index_contains(users[i]), i != 500) << i;
    if (i != 500) {
      EXPECT_EQ(s.id(), static_cast<std::uint64_t>(i + 1));
    }
  }
  Slot oldest;
  ASSERT_TRUE(table.quarantine_pop(&oldest));
  EXPECT_EQ(oldest.id(), 1u);
  EXPECT_FALSE(table.index_contains(users[0]));
  Slot s;
  EXPECT_TRUE(table.find_quarantined(users[999], &s));
  EXPECT_EQ(s.id(), 1000u);
}

// The registry the fault handler searches pairs each allocator with its own table, also while
// allocators come and go on several threads at once (an allocator must never be searched
// through another one's table). The pairs here are tags, never dereferenced.
TEST(AllocatorRegistry, EachAllocatorIsPairedWithItsOwnTableUnderConcurrentRegistration) {
  static char allocators[3], tables[3];
  const auto tag_allocator = [](int t) { return reinterpret_cast<GuardAllocator*>(&allocators[t]); };
  const auto tag_table = [](int t) { return reinterpret_cast<SlotTable*>(&tables[t]); };
  std::atomic<bool> done{false};
  std::atomic<int> mismatches{0};
  std::thread reader([&] {
    do {
      mate::guard::Registered regs[mate::guard::kMaxAllocators];
      const int n = mate::guard::registered_allocators(regs, mate::guard::kMaxAllocators);
      for (int i = 0; i < n; ++i)
        for (int t = 0; t < 3; ++t)
          if ((regs[i].allocator == tag_allocator(t)) != (regs[i].table == tag_table(t))) ++mismatches;
    } while (!done.load());
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        mate::guard::register_allocator(tag_allocator(t), tag_table(t));
        // Registered a while, so that the reader sees it (the load keeps the loop from being
        // optimized away).
        for (int spin = 0; spin < 50 && !done.load(std::memory_order_relaxed); ++spin) {
        }
        mate::guard::unregister_allocator(tag_allocator(t));
      }
    });
  for (auto& w : writers) w.join();
  done.store(true);
  reader.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
