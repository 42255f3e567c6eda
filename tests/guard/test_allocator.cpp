// The allocator core in-process over the host backend (and a wrapper that refuses mappings,
// counts synchronizations and reports graph capture): placement, canaries, zero bytes,
// quarantine, double/invalid free, lookup, statistics, threads, install semantics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "mate/config.hpp"
#include "mate/device/driver.hpp"
#include "mate/device/vendors.hpp"
#include "mate/guard/allocator.hpp"
#include "guard/platform/map_entries.hpp"

namespace {

using mate::device::Backend;
using mate::device::Status;
using mate::guard::AllocError;
using mate::guard::FreeResult;
using mate::guard::GuardAllocator;
using mate::guard::GuardAllocatorConfig;
using mate::guard::Mode;
using mate::guard::OnCorruption;
using mate::guard::Priority;
using mate::guard::Relation;
using mate::guard::State;
using ::testing::HasSubstr;

// Delegates to the host backend; can refuse reservations, counts synchronize(), can claim
// that every stream is capturing.
class WrappedBackend : public Backend {
 public:
  mate::device::Kind kind() const noexcept override { return kind_; }
  const char* name() const noexcept override { return "wrapped"; }
  std::size_t granularity() const noexcept override {
    return granularity_ != 0 ? granularity_ : host().granularity();
  }
  std::size_t default_alignment() const noexcept override { return host().default_alignment(); }
  Status reserve(std::size_t bytes, std::uintptr_t* base) noexcept override {
    if (refuse.load() || bytes > refuse_above.load()) return Status{ENOMEM, "mmap(PROT_NONE) to reserve address space"};
    return host().reserve(bytes, base);
  }
  Status release(std::uintptr_t base, std::size_t bytes) noexcept override {
    released += 1;
    return host().release(base, bytes);
  }
  Status map(std::uintptr_t a, std::size_t b) noexcept override { return host().map(a, b); }
  Status unmap(std::uintptr_t a, std::size_t b) noexcept override { return host().unmap(a, b); }
  Status write(std::uintptr_t d, const void* s, std::size_t b) noexcept override { return host().write(d, s, b); }
  Status read(void* d, std::uintptr_t s, std::size_t b) noexcept override { return host().read(d, s, b); }
  Status fill(std::uintptr_t d, unsigned char v, std::size_t b) noexcept override { return host().fill(d, v, b); }
  Status synchronize() noexcept override {
    syncs += 1;
    return Status::success();
  }
  Status is_capturing(void*, bool* capturing) noexcept override {
    *capturing = capture.load();
    return Status::success();
  }

  std::atomic<bool> refuse{false};
  std::atomic<std::size_t> refuse_above{SIZE_MAX};  // refuses reservations larger than this
  std::atomic<bool> capture{false};
  std::atomic<int> syncs{0};
  std::atomic<int> released{0};
  mate::device::Kind kind_ = mate::device::Kind::Host;
  std::size_t granularity_ = 0;  // 0: the host's

 private:
  static Backend& host() { return mate::device::host_backend(); }
};

GuardAllocatorConfig small(Mode mode = Mode::Tail) {
  GuardAllocatorConfig c;
  c.mode = mode;
  c.max_allocations = 4096;
  c.on_corruption = OnCorruption::Continue;
  return c;
}

const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

bool accessible(std::uintptr_t address) {
  // mincore fails with ENOMEM only for unmapped addresses; PROT_NONE is still "mapped", so use
  // msync's sibling: a zero-length check is not enough. Ask the kernel through /proc is slow;
  // instead probe with a pipe write, which fails with EFAULT on an inaccessible page.
  int fds[2];
  if (pipe(fds) != 0) return false;
  bool ok = ::write(fds[1], reinterpret_cast<const void*>(address), 1) == 1;
  close(fds[0]);
  close(fds[1]);
  return ok;
}

TEST(GuardAllocator, TailPlacementEndsAtTheGuard) {
  GuardAllocator g(mate::device::host_backend(), small(Mode::Tail));
  for (std::size_t n : {1u, 15u, 16u, 17u, 4095u, 4096u, 4097u}) {
    auto r = g.allocate(n);
    ASSERT_TRUE(r) << r.message;
    std::size_t rounded = (n + 15) / 16 * 16;
    EXPECT_EQ(r.ptr % 16, 0u);
    EXPECT_EQ((r.ptr + rounded) % kPage, 0u) << n;  // rounded size ends exactly at the guard
    EXPECT_TRUE(accessible(r.ptr + n - 1));
    EXPECT_FALSE(accessible(r.ptr + rounded));
    auto d = g.describe(r.ptr + rounded);
    EXPECT_TRUE(d.found);
    EXPECT_EQ(d.relation, Relation::PastEnd);
    EXPECT_EQ(d.offset, rounded - n);
    EXPECT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
  }
}

TEST(GuardAllocator, HeadPlacementStartsAfterTheGuard) {
  GuardAllocator g(mate::device::host_backend(), small(Mode::Head));
  for (std::size_t n : {1u, 17u, 4096u, 4097u}) {
    auto r = g.allocate(n);
    ASSERT_TRUE(r);
    EXPECT_EQ(r.ptr % kPage, 0u);
    EXPECT_FALSE(accessible(r.ptr - 1));
    std::size_t mapped = (n + kPage - 1) / kPage * kPage;
    EXPECT_TRUE(accessible(r.ptr + mapped - 1));
    EXPECT_FALSE(accessible(r.ptr + mapped));  // the second guard after the slack
    EXPECT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
  }
}

TEST(GuardAllocator, AlignmentPerCall) {
  GuardAllocator g(mate::device::host_backend(), small());
  auto r = g.allocate(100, 256);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.ptr % 256, 0u);
  EXPECT_EQ((r.ptr + 256) % kPage, 0u);
  EXPECT_EQ(g.allocate(8, 24).error, AllocError::BadAlignment);
  g.deallocate(r.ptr);
}

// Alignments above the granularity: the reservation is over-sized and the mapping slides so the
// user pointer (its start) is aligned, with the guard still right after the page-padded end
// (tail) or before the start. The padding is to the page, not the alignment: a 100-byte buffer
// aligned to 2 MiB maps (and makes resident) one page.
TEST(GuardAllocator, AlignmentAboveTheGranularity) {
  for (Mode mode : {Mode::Tail, Mode::Head}) {
    auto config = small();
    config.mode = mode;
    GuardAllocator g(mate::device::host_backend(), config);
    for (std::size_t align : {2 * kPage, 16 * kPage, std::size_t{1} << 21}) {
      for (std::size_t size : {std::size_t{0}, std::size_t{100}, 3 * kPage + 5}) {
        auto r = g.allocate(size, align);
        ASSERT_TRUE(r) << r.message;
        EXPECT_EQ(r.ptr % align, 0u) << "size " << size << " align " << align;
        auto d = g.describe(r.ptr);
        ASSERT_TRUE(d.found);
        EXPECT_EQ(d.size, size);
        if (size != 0) {
          std::memset(reinterpret_cast<void*>(r.ptr), 0x5a, size);
          EXPECT_EQ(d.mapping % kPage, 0u);
          EXPECT_GE(d.mapping, d.reservation + kPage);  // a guard granule before
          EXPECT_LE(d.mapping + d.mapped + kPage, d.reservation + d.reserved);  // and after
          EXPECT_EQ(d.mapping, r.ptr);
          EXPECT_EQ(d.mapped, ((size + kPage - 1) / kPage) * kPage);
          EXPECT_EQ(g.describe(mode == Mode::Tail ? d.mapping + d.mapped : r.ptr - 1).relation,
                    mode == Mode::Tail ? mate::guard::Relation::PastEnd : mate::guard::Relation::BeforeStart);
        }
        EXPECT_EQ(g.deallocate(r.ptr), mate::guard::FreeResult::Ok);
      }
    }
  }
}

// A huge alignment costs address space, not memory (it once padded the size to the alignment
// and filled it with canary: aligned_alloc(1 << 40, 10) ran the machine out of memory).
TEST(GuardAllocator, AHugeAlignmentCostsOnePage) {
  GuardAllocator g(mate::device::host_backend(), small());
  const std::size_t align = std::size_t{1} << 36;  // 64 GiB
  auto r = g.allocate(10, align);
  ASSERT_TRUE(r) << r.message;
  EXPECT_EQ(r.ptr % align, 0u);
  auto d = g.describe(r.ptr);
  EXPECT_EQ(d.mapped, kPage);
  EXPECT_EQ(g.deallocate(r.ptr), mate::guard::FreeResult::Ok);
}

TEST(GuardAllocator, ZeroBytesAreUniqueAndInaccessible) {
  GuardAllocator g(mate::device::host_backend(), small());
  auto a = g.allocate(0), b = g.allocate(0);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a.ptr, b.ptr);
  EXPECT_FALSE(accessible(a.ptr));
  EXPECT_EQ(g.size_of(a.ptr), 0u);
  EXPECT_EQ(g.deallocate(a.ptr), FreeResult::Ok);
  EXPECT_EQ(g.deallocate(b.ptr), FreeResult::Ok);
}

TEST(GuardAllocator, CanaryIsAddressDependentSoAShiftedCopyIsCaught) {
  GuardAllocator g(mate::device::host_backend(), small(Mode::Head));
  auto r = g.allocate(17);
  ASSERT_TRUE(r);
  auto* p = reinterpret_cast<unsigned char*>(r.ptr);
  // Copy the canary one byte to the right: each byte now holds its neighbour's pattern.
  std::memmove(p + 18, p + 17, 32);
  EXPECT_EQ(g.check_all(), 1u);
  EXPECT_EQ(g.deallocate(r.ptr), FreeResult::CanaryCorrupted);
  EXPECT_EQ(g.stats().canary_failures, 2u);  // check_all and free
}

TEST(GuardAllocator, CheckAllFindsCorruptionOfLiveAllocations) {
  GuardAllocator g(mate::device::host_backend(), small(Mode::Tail));
  auto ok = g.allocate(32), bad = g.allocate(17);
  ASSERT_TRUE(ok && bad);
  EXPECT_EQ(g.check_all(), 0u);
  reinterpret_cast<char*>(bad.ptr)[-3] = 0;  // tail mode: before the start is canary
  testing::internal::CaptureStderr();
  EXPECT_EQ(g.check_all(), 1u);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("canary corrupted (check_all): allocation #2 of 17 bytes"));
  EXPECT_THAT(err, HasSubstr("side: before the start (underrun)"));
  EXPECT_THAT(err, HasSubstr("first corrupted byte: 3 bytes before the start (offset -3)"));
  EXPECT_THAT(err, HasSubstr("rerun in head mode (mate guard-run --mode head; --guard-mode head"));
}

TEST(GuardAllocator, FreedMemoryIsUnmappedAndQuarantinedFifo) {
  WrappedBackend backend;
  GuardAllocatorConfig c = small();
  c.quarantine_bytes = 3 * (3 * kPage);  // three one-page allocations (guard, page, guard)
  GuardAllocator g(backend, c);
  std::vector<std::uintptr_t> ptrs;
  for (int i = 0; i < 5; ++i) ptrs.push_back(g.allocate(100).ptr);
  for (auto p : ptrs) {
    EXPECT_EQ(g.deallocate(p), FreeResult::Ok);
    EXPECT_FALSE(accessible(p));
  }
  auto s = g.stats();
  EXPECT_EQ(s.quarantined, 3u);
  EXPECT_EQ(s.quarantined_bytes, 9 * kPage);
  EXPECT_EQ(backend.released.load(), 2);  // the two oldest gave their address space back
  // The oldest are forgotten; the newest are still known as freed.
  EXPECT_FALSE(g.owns(ptrs[0]));
  EXPECT_TRUE(g.owns(ptrs[4]));
  auto d = g.describe(ptrs[4] + 5);
  EXPECT_EQ(d.state, State::Quarantined);
  EXPECT_EQ(d.relation, Relation::Inside);
  EXPECT_EQ(d.offset, 5u);
}

TEST(GuardAllocator, QuarantineKeepsNoResidentMemory) {
  GuardAllocatorConfig c = small();
  GuardAllocator g(mate::device::host_backend(), c);
  auto r = g.allocate(1 << 20);
  ASSERT_TRUE(r);
  std::memset(reinterpret_cast<void*>(r.ptr), 1, 1 << 20);
  ASSERT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
  std::vector<unsigned char> vec((1 << 20) / kPage);
  ASSERT_EQ(mincore(reinterpret_cast<void*>(r.ptr), 1 << 20, vec.data()), 0);
  for (unsigned char v : vec) EXPECT_EQ(v & 1, 0);
}

TEST(GuardAllocator, DoubleAndInvalidFreeAreReported) {
  GuardAllocator g(mate::device::host_backend(), small());
  auto r = g.allocate(40);
  ASSERT_TRUE(r);
  testing::internal::CaptureStderr();
  EXPECT_EQ(g.deallocate(r.ptr + 8), FreeResult::InvalidFree);
  EXPECT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
  EXPECT_EQ(g.deallocate(r.ptr), FreeResult::DoubleFree);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("invalid free of"));
  EXPECT_THAT(err, HasSubstr("it lies 8 bytes from the start of live allocation #1 of 40 bytes"));
  EXPECT_THAT(err, HasSubstr("double free of"));
  auto s = g.stats();
  EXPECT_EQ(s.double_frees, 1u);
  EXPECT_EQ(s.invalid_frees, 1u);
}

TEST(GuardAllocator, MappingRefusalIsSaidOnceAndFailsCleanly) {
  WrappedBackend backend;
  GuardAllocator g(backend, small());
  auto ok = g.allocate(10);
  ASSERT_TRUE(ok);
  backend.refuse = true;
  testing::internal::CaptureStderr();
  auto a = g.allocate(10), b = g.allocate(10);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(a.error, AllocError::MappingRefused);
  EXPECT_EQ(b.error, AllocError::MappingRefused);
  EXPECT_THAT(err, HasSubstr("refused another mapping"));
  EXPECT_THAT(err, HasSubstr("ENOMEM"));
  EXPECT_THAT(err, HasSubstr("vm.max_map_count"));
  EXPECT_EQ(err.find("refused", err.find("refused") + 1), std::string::npos) << "said twice: " << err;
  backend.refuse = false;
  // State intact: the live allocation still frees, new ones work.
  EXPECT_EQ(g.deallocate(ok.ptr), FreeResult::Ok);
  auto c = g.allocate(10);
  EXPECT_TRUE(c);
  EXPECT_EQ(g.stats().live, 1u);
}

// A request too large for what is left is that request's failure: nothing is said, the
// quarantine is kept (a program probing malloc(1 << 50) must not lose its use-after-free cover).
TEST(GuardAllocator, ARequestTooLargeFailsAloneAndKeepsTheQuarantine) {
  WrappedBackend backend;
  GuardAllocator g(backend, small());
  auto freed = g.allocate(10);
  ASSERT_TRUE(freed);
  ASSERT_EQ(g.deallocate(freed.ptr), FreeResult::Ok);
  backend.refuse_above = std::size_t{1} << 20;
  testing::internal::CaptureStderr();
  auto huge = g.allocate(std::size_t{1} << 30);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(huge.error, AllocError::NoMemory);
  EXPECT_EQ(err, "");
  EXPECT_EQ(g.stats().quarantined, 1u);
  EXPECT_EQ(g.describe(freed.ptr).state, State::Quarantined);
  EXPECT_TRUE(g.allocate(10));  // small ones still guarded
}

// A slot keeps the placement in 4 KiB units (64-byte records): a reservation over 16 TiB is
// refused as too large, and a backend whose granules are not whole 4 KiB units is refused.
TEST(GuardAllocator, PlacementLimitsOfTheCompactRecord) {
  WrappedBackend backend;
  GuardAllocator g(backend, small());
  auto huge = g.allocate(std::size_t{1} << 44);  // 16 TiB plus the guards
  EXPECT_EQ(huge.error, AllocError::TooLarge);
  EXPECT_THAT(huge.message, HasSubstr("16 TiB"));
  EXPECT_TRUE(g.allocate(10));
  WrappedBackend odd;
  odd.granularity_ = 2048;
  try {
    GuardAllocator refused(odd, small());
    ADD_FAILURE() << "a 2048-byte granularity was accepted";
  } catch (const mate::guard::GuardError& e) {
    EXPECT_THAT(e.what(), HasSubstr("granularity of 2048 bytes; it must be a multiple of 4096"));
  }
}

// The map-entry limit is kept by counting the process's real entries: neighbouring guard pages
// and quarantined ranges share entries, so more allocations are guarded than 3 entries each
// would allow, the quarantine is not given up for nothing, and the process stays within the limit.
TEST(GuardAllocator, MapEntryLimitCountsTheProcesssRealEntries) {
  GuardAllocatorConfig c = small();
  c.max_allocations = 1u << 14;
  std::size_t start = 0;
  ASSERT_TRUE(mate::guard::count_map_entries(&start));
  ASSERT_GT(start, 0u);
  c.map_entry_limit = start + 3000;
  GuardAllocator g(mate::device::host_backend(), c);
  std::vector<std::uintptr_t> live;
  for (int i = 0; i < 400; ++i) {  // quarantined ranges between live ones
    auto r = g.allocate(100);
    ASSERT_TRUE(r);
    if (i % 2 == 0) live.push_back(r.ptr);
    else ASSERT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
  }
  testing::internal::CaptureStderr();
  for (;;) {
    auto r = g.allocate(100);
    if (!r) {
      EXPECT_EQ(r.error, AllocError::OverBudget);
      break;
    }
    live.push_back(r.ptr);
    ASSERT_LT(live.size(), 3000u) << "the limit was not kept";
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("used up their share of the memory map entries"));
  EXPECT_THAT(err, HasSubstr("maps up to " + std::to_string(c.map_entry_limit) + " entries"));
  EXPECT_GT(live.size(), 1200u) << "3 entries an allocation would stop at 1000";
  std::size_t end = 0;
  ASSERT_TRUE(mate::guard::count_map_entries(&end));
  EXPECT_LE(end, c.map_entry_limit);
  const std::size_t quarantined = g.stats().quarantined;
  EXPECT_GT(quarantined, 0u);
  // Refused again at once, without counting or giving up more of the quarantine...
  testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(g.allocate(100).error, AllocError::OverBudget);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "the refusal is said once";
  EXPECT_EQ(g.stats().quarantined, quarantined);
  // ...until frees make room.
  for (std::size_t i = 0; i < 600; ++i) EXPECT_EQ(g.deallocate(live[i]), FreeResult::Ok);
  live.erase(live.begin(), live.begin() + 600);
  auto again = g.allocate(100);
  ASSERT_TRUE(again);
  live.push_back(again.ptr);
  for (auto p : live) EXPECT_EQ(g.deallocate(p), FreeResult::Ok);
}

// The program's own mappings made after the guard started count too: a program that frees as it
// goes (which the per-live-allocation estimate alone would let run without counts) is counted
// again after a while, and the guard then leaves the program its entries.
TEST(GuardAllocator, MapEntryLimitSeesTheProgramsOwnLaterMappings) {
  GuardAllocatorConfig c = small();
  c.max_allocations = 1u << 14;
  c.quarantine_bytes = 0;  // frees give their entries back at once
  std::size_t start = 0;
  ASSERT_TRUE(mate::guard::count_map_entries(&start));
  c.map_entry_limit = start + 4000;
  GuardAllocator g(mate::device::host_backend(), c);
  // 1,500 entries of the program's own: pages of alternating protection.
  const std::size_t pages = 1500;
  auto* region = static_cast<char*>(mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  for (std::size_t i = 1; i < pages; i += 2) ASSERT_EQ(mprotect(region + i * kPage, kPage, PROT_READ), 0);
  for (std::size_t i = 0; i < 8 * (c.map_entry_limit / 3) + 100; ++i) {
    auto r = g.allocate(100);
    ASSERT_TRUE(r);
    ASSERT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
  }
  std::vector<std::uintptr_t> live;
  testing::internal::CaptureStderr();
  for (auto r = g.allocate(100); r; r = g.allocate(100)) {
    live.push_back(r.ptr);
    ASSERT_LT(live.size(), 4000u) << "the limit was not kept";
  }
  (void)testing::internal::GetCapturedStderr();
  std::size_t end = 0;
  ASSERT_TRUE(mate::guard::count_map_entries(&end));
  EXPECT_LE(end, c.map_entry_limit);
  for (auto p : live) EXPECT_EQ(g.deallocate(p), FreeResult::Ok);
  munmap(region, pages * kPage);
}

// Small blocks (Priority::Low, an interpreter's) stop at their own lower limit, said once, while
// normal allocations (tensors, aligned and large blocks) still get the rest; small blocks never
// take the quarantine's entries.
TEST(GuardAllocator, LowPriorityAllocationsStopAtTheirShare) {
  GuardAllocatorConfig c = small();
  c.max_allocations = 1u << 14;
  std::size_t start = 0;
  ASSERT_TRUE(mate::guard::count_map_entries(&start));
  c.map_entry_limit = start + 4000;
  c.low_priority_entry_limit = start + 1500;
  GuardAllocator g(mate::device::host_backend(), c);
  std::vector<std::uintptr_t> live;
  for (int i = 0; i < 20; ++i) {
    auto r = g.allocate(100);
    ASSERT_TRUE(r);
    ASSERT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
  }
  const std::size_t quarantined = g.stats().quarantined;
  ASSERT_GT(quarantined, 0u);
  testing::internal::CaptureStderr();
  for (;;) {
    auto r = g.allocate(100, 0, nullptr, Priority::Low);
    if (!r) {
      EXPECT_EQ(r.error, AllocError::OverBudget);
      break;
    }
    live.push_back(r.ptr);
    ASSERT_LT(live.size(), 1500u) << "the low-priority limit was not kept";
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("memory map entries are getting short"));
  EXPECT_THAT(err, HasSubstr("vm.max_map_count"));
  EXPECT_GT(live.size(), 300u);
  std::size_t now = 0;
  ASSERT_TRUE(mate::guard::count_map_entries(&now));
  EXPECT_LE(now, c.low_priority_entry_limit);
  EXPECT_EQ(g.stats().quarantined, quarantined) << "small blocks took the quarantine's entries";
  for (int i = 0; i < 300; ++i) {
    auto r = g.allocate(100);
    ASSERT_TRUE(r) << "normal allocation " << i << " refused below map_entry_limit";
    live.push_back(r.ptr);
  }
  testing::internal::CaptureStderr();
  EXPECT_EQ(g.allocate(100, 0, nullptr, Priority::Low).error, AllocError::OverBudget);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "said once";
  for (auto p : live) EXPECT_EQ(g.deallocate(p), FreeResult::Ok);
}

// When the entries cannot be counted (no file descriptor free to read /proc/self/maps), the
// estimate is kept from above: allocations are refused rather than mapped past an unknown count.
// Exits 0 when the allocation was refused.
void allocate_with_no_descriptor_free() {
  {  // UBSan (sanitizer builds) checks a virtual call's object with a pipe the first time it
     // meets its type: it meets the host backend before the descriptors run out.
    GuardAllocator warm(mate::device::host_backend(), small());
    (void)warm.deallocate(warm.allocate(100).ptr);
  }
  const rlimit few{32, 32};
  if (setrlimit(RLIMIT_NOFILE, &few) != 0) _exit(3);
  while (dup(0) >= 0) {
  }
  std::size_t n = 0;
  if (mate::guard::count_map_entries(&n)) _exit(4);  // a descriptor was still free
  GuardAllocatorConfig c = small();
  c.map_entry_limit = std::size_t{1} << 30;
  GuardAllocator g(mate::device::host_backend(), c);
  _exit(g.allocate(100).error == AllocError::OverBudget ? 0 : 5);
}

TEST(GuardAllocatorDeathTest, MapEntryLimitRefusesWhenTheEntriesCannotBeCounted) {
  EXPECT_EXIT(allocate_with_no_descriptor_free(), ::testing::ExitedWithCode(0),
              "used up their share of the memory map entries");
}

// Live and quarantined allocations together stay within max_allocations: the oldest quarantined
// one is evicted to make room, and only live allocations can fill the table.
TEST(GuardAllocator, AFullTableEvictsTheQuarantineBeforeRefusing) {
  WrappedBackend backend;
  GuardAllocatorConfig c = small();
  c.max_allocations = 4;
  GuardAllocator g(backend, c);
  for (int i = 0; i < 10; ++i) {
    auto r = g.allocate(100);
    ASSERT_TRUE(r) << "allocation " << i << ": " << (r.message != nullptr ? r.message : "");
    ASSERT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
  }
  EXPECT_EQ(g.stats().quarantined, 4u);
  std::vector<std::uintptr_t> live;
  for (int i = 0; i < 4; ++i) live.push_back(g.allocate(100).ptr);
  EXPECT_EQ(g.stats().quarantined, 0u);
  auto full = g.allocate(100);
  EXPECT_EQ(full.error, AllocError::TableFull);
  EXPECT_THAT(full.message, HasSubstr("max_allocations"));
  for (auto p : live) EXPECT_EQ(g.deallocate(p), FreeResult::Ok);
}

TEST(GuardAllocator, SyncOnFreeSynchronizesBeforeTheCheck) {
  WrappedBackend backend;
  GuardAllocatorConfig c = small();
  GuardAllocator g(backend, c);
  g.deallocate(g.allocate(10).ptr);
  EXPECT_EQ(backend.syncs.load(), 1);
  c.sync_on_free = false;
  GuardAllocator h(backend, c);
  h.deallocate(h.allocate(10).ptr);
  EXPECT_EQ(backend.syncs.load(), 1);
}

TEST(GuardAllocator, GraphCaptureIsRefusedWithTheSeedMessage) {
  WrappedBackend backend;
  backend.kind_ = mate::device::Kind::Musa;
  GuardAllocator g(backend, small());
  auto live = g.allocate(10);
  ASSERT_TRUE(live);
  backend.capture = true;
  auto r = g.allocate(10);
  EXPECT_EQ(r.error, AllocError::Capturing);
  EXPECT_STREQ(r.message, "guard allocator debug mode does not support MUSA graph capture");
  testing::internal::CaptureStderr();
  EXPECT_EQ(g.deallocate(live.ptr), FreeResult::Capturing);
  testing::internal::GetCapturedStderr();
  backend.capture = false;
  EXPECT_EQ(g.deallocate(live.ptr), FreeResult::Ok);
}

TEST(GuardAllocator, StatisticsCountLiveAndQuarantined) {
  GuardAllocator g(mate::device::host_backend(), small());
  auto a = g.allocate(10), b = g.allocate(20);
  g.note_unguarded();
  g.deallocate(a.ptr);
  auto s = g.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.frees, 1u);
  EXPECT_EQ(s.live, 1u);
  EXPECT_EQ(s.live_bytes, 20u);
  EXPECT_EQ(s.quarantined, 1u);
  EXPECT_EQ(s.quarantined_bytes, 3 * kPage);
  EXPECT_EQ(s.unguarded, 1u);
  g.deallocate(b.ptr);
}

TEST(GuardAllocator, ManyThreadsAllocatingAndFreeing) {
  GuardAllocatorConfig c = small();
  c.max_allocations = 1 << 14;
  c.quarantine_bytes = 64 * kPage;
  GuardAllocator g(mate::device::host_backend(), c);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::uintptr_t> mine;
      for (int i = 0; i < 500; ++i) {
        auto r = g.allocate(static_cast<std::size_t>(1 + (i * 37 + t) % 300));
        if (!r) {
          failures += 1;
          continue;
        }
        std::memset(reinterpret_cast<void*>(r.ptr), t, g.size_of(r.ptr));
        mine.push_back(r.ptr);
        if (mine.size() > 8) {
          if (g.deallocate(mine.front()) != FreeResult::Ok) failures += 1;
          mine.erase(mine.begin());
        }
      }
      for (auto p : mine)
        if (g.deallocate(p) != FreeResult::Ok) failures += 1;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto s = g.stats();
  EXPECT_EQ(s.allocations, 4000u);
  EXPECT_EQ(s.frees, 4000u);
  EXPECT_EQ(s.live, 0u);
  EXPECT_LE(s.quarantined_bytes, 64 * kPage);
}

// The readers (describe, size_of, owns, may_hold, stats, check_all) while other threads allocate
// and free: each worker checks what the allocator says of its own pointers, which no other
// thread frees, and one thread inspects everything meanwhile. Run it under the tsan preset after
// changing the tables' locking.
TEST(GuardAllocator, ReadersAgreeWithWritersOnOtherThreads) {
  GuardAllocatorConfig c = small();
  c.max_allocations = 1 << 14;
  c.quarantine_bytes = 64 * kPage;
  GuardAllocator g(mate::device::host_backend(), c);
  std::atomic<int> failures{0};
  std::atomic<int> workers_left{4};
  std::atomic<bool> inspecting{false};  // the workers start once the inspector runs
  std::atomic<std::uintptr_t> recent{0};  // a pointer some worker handed out lately
  const auto fail = [&](const char* what, std::uintptr_t p) {
    if (failures.fetch_add(1) < 5) ADD_FAILURE() << what << " at 0x" << std::hex << p;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      while (!inspecting.load()) std::this_thread::yield();
      struct Mine {
        std::uintptr_t ptr;
        std::size_t size;
        std::uint64_t id;
      };
      std::vector<Mine> mine;
      for (int i = 0; i < 400; ++i) {
        const std::size_t size = static_cast<std::size_t>(1 + (i * 37 + t) % 300);
        auto r = g.allocate(size);
        if (!r) {
          fail("allocation failed", 0);
          continue;
        }
        recent.store(r.ptr, std::memory_order_release);
        if (g.size_of(r.ptr) != size || !g.owns(r.ptr)) fail("size_of/owns of a live pointer", r.ptr);
        const auto d = g.describe(r.ptr + size - 1);
        if (!d.found || d.state != State::Live || d.user != r.ptr || d.size != size || d.relation != Relation::Inside)
          fail("describe of a live allocation's last byte", r.ptr);
        mine.push_back({r.ptr, size, d.id});
        if (mine.size() > 6) {
          const Mine old = mine.front();
          mine.erase(mine.begin());
          if (g.deallocate(old.ptr) != FreeResult::Ok) fail("free", old.ptr);
          // Quarantined, or already given back to make room for other threads' allocations (and
          // its addresses perhaps another allocation's by now).
          const auto f = g.describe(old.ptr);
          if (f.found && f.id == old.id && (f.state != State::Quarantined || f.user != old.ptr || f.size != old.size))
            fail("describe of a freed allocation", old.ptr);
        }
      }
      for (const Mine& m : mine)
        if (g.deallocate(m.ptr) != FreeResult::Ok) fail("free", m.ptr);
      workers_left.fetch_sub(1);
    });
  }
  std::uint64_t inspections = 0;
  threads.emplace_back([&] {
    inspecting.store(true);
    do {
      const auto s = g.stats();
      if (s.frees > s.allocations || s.canary_failures != 0) fail("stats", 0);
      if (g.check_all() != 0) fail("check_all found a canary not intact", 0);
      const std::uintptr_t p = recent.load(std::memory_order_acquire);
      if (p != 0 && !g.may_hold(p)) fail("may_hold of a pointer it handed out", p);
      // Live, quarantined or given back meanwhile: any allocation, but one read whole (a slot
      // read while another thread fills it mixes two allocations' fields).
      const auto d = g.describe(p);
      if (d.found && (d.user < d.reservation || d.user + d.size > d.reservation + d.reserved))
        fail("describe: the user range lies outside the reservation", p);
      if (d.found && d.state == State::Live && (d.user < d.mapping || d.user + d.size > d.mapping + d.mapped))
        fail("describe: a live allocation's user range lies outside its mapping", p);
      ++inspections;
    } while (workers_left.load() > 0);
  });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(inspections, 0u);
  const auto s = g.stats();
  EXPECT_EQ(s.allocations, 1600u);
  EXPECT_EQ(s.frees, 1600u);
  EXPECT_EQ(s.live, 0u);
}

// A device-kind backend that, the first time check_slot asks its kind (holding the table lock,
// not yet the scratch lock), starts a thread running prepare_fork/after_fork and gives it time
// to take whatever lock it takes first.
class ForkDuringCheckBackend : public WrappedBackend {
 public:
  mate::device::Kind kind() const noexcept override {
    if (armed.exchange(false)) {
      forker = std::thread([this] {
        allocator->prepare_fork();
        allocator->after_fork();
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return mate::device::Kind::Cuda;
  }
  mutable std::atomic<bool> armed{false};
  mutable std::thread forker;
  GuardAllocator* allocator = nullptr;
};

// check_all takes the table lock, then the scratch lock; prepare_fork must take them in the same
// order, or a fork during a canary check deadlocks. Run in a child so a deadlock fails the test
// instead of hanging it.
TEST(GuardAllocator, PrepareForkTakesLocksInCheckAllsOrder) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ForkDuringCheckBackend backend;
    GuardAllocator g(backend, small());
    backend.allocator = &g;
    auto r = g.allocate(100);
    if (!r) _exit(2);
    backend.armed = true;
    const std::size_t bad = g.check_all();
    backend.forker.join();
    _exit(bad == 0 ? 0 : 3);
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 200 && done == 0; ++i) {  // up to 10 s
    done = waitpid(pid, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "check_all and prepare_fork deadlocked (lock-order inversion)";
  }
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(GuardAllocator, DescribeOutsideAnyAllocation) {
  GuardAllocator g(mate::device::host_backend(), small());
  int local = 0;
  EXPECT_FALSE(g.describe(reinterpret_cast<std::uintptr_t>(&local)).found);
}

TEST(InstallGuardAllocator, RepeatedInstallsSameConfigDifferentConfig) {
  GuardAllocatorConfig c;
  c.max_allocations = 256;
  GuardAllocator& a = mate::guard::install_guard_allocator(c);
  EXPECT_EQ(&a, &mate::guard::install_guard_allocator(c));
  EXPECT_EQ(mate::guard::installed_guard_allocator(), &a);
  GuardAllocatorConfig other = c;
  other.mode = Mode::Head;
  try {
    mate::guard::install_guard_allocator(other);
    FAIL() << "no error";
  } catch (const mate::guard::GuardError& e) {
    EXPECT_THAT(e.what(), HasSubstr("already installed with mode=tail"));
    EXPECT_THAT(e.what(), HasSubstr("again with mode=head"));
  }
}

TEST(InstallGuardAllocator, AfterTheFirstAllocationIsRefused) {
  mate::guard::note_backend_allocation(mate::device::Kind::Musa);
  GuardAllocatorConfig c;
  c.backend = mate::device::Kind::Musa;
  try {
    mate::guard::install_guard_allocator(c);
    FAIL() << "no error";
  } catch (const mate::guard::GuardError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Guard allocator must be installed before the first MUSA allocation in the process"));
  }
}

// Device memory MATE mapped before the install (here through a driver backend, as replay's tensors
// are) makes the install fail as the seed says. In a child: the install is process-wide.
int install_after_mates_own_device_mapping() {
  mate::config::ScopedOverride fake{mate::config::Var::MATE_FAKE_DRIVER_PATH, MATE_FAKE_DRIVER_LIBRARY};
  std::string reason;
  auto backend = mate::device::open_driver_backend(mate::device::Kind::Cuda, 0, &reason);
  if (backend == nullptr) return 3;
  std::uintptr_t base = 0;
  const std::size_t g = backend->granularity();
  if (!backend->reserve(g, &base).ok() || !backend->map(base, g).ok()) return 4;
  GuardAllocatorConfig c;
  c.backend = mate::device::Kind::Cuda;
  try {
    mate::guard::install_guard_allocator(c);
  } catch (const mate::guard::GuardError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 0;
  }
  return 5;
}

TEST(InstallGuardAllocatorDeathTest, AfterMatesOwnDeviceAllocationIsRefused) {
  EXPECT_EXIT(std::_Exit(install_after_mates_own_device_mapping()), ::testing::ExitedWithCode(0),
              "Guard allocator must be installed before the first CUDA allocation in the process");
}

}  // namespace

namespace {

// The default quarantine budget depends on the memory: 64 MiB of address space on the host,
// 64 GiB on a device, where 2 MiB granules would leave a 64 MiB quarantine holding ~10 tensors.
TEST(GuardAllocator, DefaultQuarantineBudgetDependsOnTheBackend) {
  EXPECT_EQ(mate::guard::default_quarantine_bytes(mate::device::Kind::Host), std::size_t{64} << 20);
  EXPECT_EQ(mate::guard::default_quarantine_bytes(mate::device::Kind::Cuda), std::size_t{64} << 30);
  EXPECT_EQ(mate::guard::default_quarantine_bytes(mate::device::Kind::Musa), std::size_t{64} << 30);
  GuardAllocatorConfig defaults;
  EXPECT_EQ(defaults.quarantine_bytes, mate::guard::kQuarantineForBackend);
  EXPECT_THAT(mate::guard::describe(defaults), HasSubstr("quarantine_bytes=backend-default"));

  constexpr std::size_t kTwoMiB = std::size_t{2} << 20;
  constexpr int kFrees = 40;  // 40 x (2 MiB + two guard pages) > 64 MiB
  for (auto kind : {mate::device::Kind::Host, mate::device::Kind::Cuda}) {
    WrappedBackend backend;
    backend.kind_ = kind;
    GuardAllocator g(backend, defaults);
    for (int i = 0; i < kFrees; ++i) {
      auto r = g.allocate(kTwoMiB);
      ASSERT_TRUE(r) << r.message;
      ASSERT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
    }
    auto s = g.stats();
    if (kind == mate::device::Kind::Host) {
      EXPECT_LT(s.quarantined, static_cast<std::uint64_t>(kFrees));
      EXPECT_LE(s.quarantined_bytes, std::size_t{64} << 20);
    } else {
      EXPECT_EQ(s.quarantined, static_cast<std::uint64_t>(kFrees));  // all still quarantined
    }
  }
}

// Device memory: a small buffer's canary fills the rest of its granule (2 MiB on a GPU), so it is
// written and checked through the staging buffer in several chunks, each compared against the
// pattern table run by run. A corruption straddling the boundary between two chunks is found
// whole: where it starts, how many bytes, and the bytes after it.
TEST(GuardAllocator, ADeviceCanaryLargerThanTheStagingBufferIsCheckedAcrossChunks) {
  WrappedBackend backend;
  backend.kind_ = mate::device::Kind::Cuda;
  backend.granularity_ = std::size_t{4} << 20;  // four 1 MiB staging chunks
  GuardAllocator g(backend, small(Mode::Tail));
  auto r = g.allocate(1000);
  ASSERT_TRUE(r) << r.message;
  const std::uintptr_t mapping = r.ptr + 1008 - backend.granularity_;  // tail: 1000 rounded to 16 ends it
  EXPECT_EQ(g.check_all(), 0u);  // ~4 MiB of canary read back intact

  const std::uintptr_t chunk_boundary = mapping + (std::size_t{2} << 20);
  auto* bytes = reinterpret_cast<unsigned char*>(chunk_boundary);
  bytes[-1] = 0;
  bytes[0] = 0;
  bytes[1] = 0;
  testing::internal::CaptureStderr();
  EXPECT_EQ(g.check_all(), 1u);
  const std::string err = testing::internal::GetCapturedStderr();
  const std::size_t first = r.ptr - (chunk_boundary - 1);
  EXPECT_THAT(err, HasSubstr("first corrupted byte: " + std::to_string(first) + " bytes before the start"));
  EXPECT_THAT(err, HasSubstr("corrupted bytes: 3 of " + std::to_string(backend.granularity_ - 1008) + " canary bytes"));
  EXPECT_THAT(err, HasSubstr("found:    00 00 00 "));
  testing::internal::CaptureStderr();
  EXPECT_EQ(g.deallocate(r.ptr), FreeResult::CanaryCorrupted);
  testing::internal::GetCapturedStderr();
}

// The fake driver's hooks for page-locked memory and copies (tests/fake_driver).
struct FakeCopies {
  void (*pinned)(int*, long*, long*) = nullptr;  // ranges pinned; copies from/to pinned, pageable memory
  void (*copies)(long*, long*, long*) = nullptr;  // host to device, device to host, device to device
  void (*set_host_register_error)(int) = nullptr;
  void (*counts)(int*, int*, int*) = nullptr;  // reservations, physical allocations, mappings
};

const FakeCopies& fake_copies() {
  static FakeCopies f = [] {
    FakeCopies r;
    void* h = dlopen(MATE_FAKE_DRIVER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return r;
    r.pinned = reinterpret_cast<void (*)(int*, long*, long*)>(dlsym(h, "fake_driver_pinned"));
    r.copies = reinterpret_cast<void (*)(long*, long*, long*)>(dlsym(h, "fake_driver_copies"));
    r.set_host_register_error = reinterpret_cast<void (*)(int)>(dlsym(h, "fake_driver_set_host_register_error"));
    r.counts = reinterpret_cast<void (*)(int*, int*, int*)>(dlsym(h, "fake_driver_counts"));
    return r;
  }();
  return f;
}

// The guard's device canary through the fake driver: written by device-side copies from the
// pattern's device image, read back at free through the page-locked staging buffer.
class DeviceGuardCanaryCopies : public ::testing::TestWithParam<mate::device::Kind> {
 protected:
  void SetUp() override {
    ASSERT_NE(fake_copies().pinned, nullptr);
    ASSERT_NE(fake_copies().copies, nullptr);
    ASSERT_NE(fake_copies().set_host_register_error, nullptr);
    ASSERT_NE(fake_copies().counts, nullptr);
    std::string reason;
    backend_ = mate::device::open_driver_backend(GetParam(), 0, &reason);
    ASSERT_NE(backend_, nullptr) << reason;
  }
  void TearDown() override { fake_copies().set_host_register_error(0); }

  struct Counts {
    int ranges = 0;
    long pinned = 0, pageable = 0;                                  // copies by host memory
    long host_to_device = 0, device_to_host = 0, device_to_device = 0;  // copies by direction
    Counts operator-(const Counts& o) const {
      return {ranges, pinned - o.pinned, pageable - o.pageable, host_to_device - o.host_to_device,
              device_to_host - o.device_to_host, device_to_device - o.device_to_device};
    }
  };
  static Counts counts() {
    Counts c;
    fake_copies().pinned(&c.ranges, &c.pinned, &c.pageable);
    fake_copies().copies(&c.host_to_device, &c.device_to_host, &c.device_to_device);
    return c;
  }
  // The copies an allocation of `size` and its free make, after a first allocation (which makes
  // the pattern's image).
  struct AllocFree {
    Counts alloc, free;
  };
  static AllocFree copies_of(GuardAllocator& g, std::size_t size) {
    g.deallocate(g.allocate(100).ptr);
    const Counts before = counts();
    auto r = g.allocate(size);
    EXPECT_TRUE(r) << r.message;
    const Counts allocated = counts();
    EXPECT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
    return {allocated - before, counts() - allocated};
  }
  GuardAllocatorConfig config(Mode mode = Mode::Tail) const {
    GuardAllocatorConfig c = small(mode);
    c.backend = GetParam();
    return c;
  }

  mate::config::ScopedOverride fake_{mate::config::Var::MATE_FAKE_DRIVER_PATH, MATE_FAKE_DRIVER_LIBRARY};
  std::unique_ptr<mate::device::DriverBackend> backend_;
};

// The staging buffer is page-locked for the allocator's lifetime; the canary is written without
// crossing the bus, and read back at free through the pinned staging buffer. (1024 bytes: a
// multiple of the 256-byte alignment, so tail mode has no padding after the end to write.)
TEST_P(DeviceGuardCanaryCopies, WrittenOnTheDeviceReadBackThroughPageLockedMemory) {
  const int ranges_before = counts().ranges;
  int reservations = 0, physicals = 0, mappings = 0;
  fake_copies().counts(&reservations, &physicals, &mappings);
  for (Mode mode : {Mode::Tail, Mode::Head}) {
    GuardAllocator g(*backend_, config(mode));
    EXPECT_EQ(counts().ranges, ranges_before + 1);
    const AllocFree copies = copies_of(g, 1024);
    EXPECT_EQ(copies.alloc.device_to_device, 1) << mate::guard::to_string(mode);
    EXPECT_EQ(copies.alloc.host_to_device, 0) << mate::guard::to_string(mode);
    EXPECT_GE(copies.free.device_to_host, 1) << mate::guard::to_string(mode);
    EXPECT_EQ(copies.free.pageable, 0) << mate::guard::to_string(mode);
  }
  EXPECT_EQ(counts().ranges, ranges_before);  // unregistered with the allocator
  int reservations_after = 0, physicals_after = 0, mappings_after = 0;  // the image given back too
  fake_copies().counts(&reservations_after, &physicals_after, &mappings_after);
  EXPECT_EQ(reservations_after, reservations);
  EXPECT_EQ(physicals_after, physicals);
  EXPECT_EQ(mappings_after, mappings);
}

// What the device copies wrote is the address-dependent pattern wherever the buffer starts: the
// check finds every canary intact, and a corrupted byte far from the buffer is still found.
TEST_P(DeviceGuardCanaryCopies, TheCopiedCanaryIsThePatternAtEveryOffset) {
  for (Mode mode : {Mode::Tail, Mode::Head}) {
    GuardAllocator g(*backend_, config(mode));
    g.deallocate(g.allocate(100).ptr);  // makes the image
    for (std::size_t size : {1, 100, 1000, 4095, 4097, 20000, 65536 - 256 - 1}) {
      const Counts before = counts();
      auto r = g.allocate(size);
      ASSERT_TRUE(r) << r.message;
      // Not staged instead (a canary shorter than a pattern period, as 65279 bytes leave in a
      // 64 KiB granule, is staged on purpose).
      if (size < 60000) {
        EXPECT_GE((counts() - before).device_to_device, 1) << "size " << size;
      }
      EXPECT_EQ(g.check_all(), 0u) << "size " << size << " mode " << mate::guard::to_string(mode);
      EXPECT_EQ(g.deallocate(r.ptr), FreeResult::Ok);
    }
  }
  GuardAllocator g(*backend_, config(Mode::Tail));
  auto r = g.allocate(1000);
  ASSERT_TRUE(r);
  auto* far_before = reinterpret_cast<volatile unsigned char*>(r.ptr - 40000);  // device memory is host memory in the fake
  *far_before = static_cast<unsigned char>(*far_before ^ 0xff);
  testing::internal::CaptureStderr();
  EXPECT_EQ(g.check_all(), 1u);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("first corrupted byte: 40000 bytes before the start"));
  testing::internal::CaptureStderr();
  EXPECT_EQ(g.deallocate(r.ptr), FreeResult::CanaryCorrupted);
  testing::internal::GetCapturedStderr();
}

// Page-locked memory is limited; when the driver refuses it the guard still works, from
// pageable memory.
TEST_P(DeviceGuardCanaryCopies, WhenPageLockingIsRefusedTheCanaryStillWorks) {
  fake_copies().set_host_register_error(2);  // out of memory
  const int ranges_before = counts().ranges;
  GuardAllocator g(*backend_, config());
  EXPECT_EQ(counts().ranges, ranges_before);
  const AllocFree copies = copies_of(g, 1024);
  EXPECT_EQ(copies.free.pinned, 0);
  EXPECT_GE(copies.free.pageable, 1);
}

INSTANTIATE_TEST_SUITE_P(Prefixes, DeviceGuardCanaryCopies, ::testing::Values(mate::device::Kind::Cuda, mate::device::Kind::Musa),
                         [](const auto& info) { return std::string(mate::device::kind_name(info.param)); });

}  // namespace
