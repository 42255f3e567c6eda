// A device fault through the fake driver: the synchronize at free returns the sticky
// illegal-address error (700) and the guard names the allocation nearest to the tensor range the
// logged API call passed. Also the backtrace depot that keeps quarantined records small.
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mate/config.hpp"
#include "mate/device/driver.hpp"
#include "mate/guard/allocator.hpp"
#include "mate/guard/device_fault_report.hpp"
#include "mate/core/recent_device_ranges.hpp"
#include "mate/log/api.hpp"
#include "guard/stack/stack_depot.hpp"

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;
using ::testing::HasSubstr;
using ::testing::Not;

void set_sticky_error(int code) {
  void* h = dlopen(MATE_FAKE_DRIVER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto* set = reinterpret_cast<void (*)(int)>(dlsym(h, "fake_driver_set_sticky_error"));
  ASSERT_NE(set, nullptr);
  set(code);
}

// The user's "kernel launcher": an API function logged at level 3 that takes a device tensor.
void launch_scale(DLTensor* x) {
  MATE_API("scale_kernel", x).run([] {});
}

// Device 0 of the fake CUDA driver (tests/fake_driver), and a guard config for its memory.
struct FakeCuda {
  ScopedOverride path{Var::MATE_FAKE_DRIVER_PATH, MATE_FAKE_DRIVER_LIBRARY};
  std::string reason;
  std::unique_ptr<mate::device::DriverBackend> backend =
      mate::device::open_driver_backend(mate::device::Kind::Cuda, 0, &reason);
  mate::guard::GuardAllocatorConfig config() const {
    mate::guard::GuardAllocatorConfig c;
    c.backend = mate::device::Kind::Cuda;
    return c;
  }
};

TEST(DeviceFault, IllegalAddressAtFreeNamesTheAllocationNearTheLastCallsTensor) {
  FakeCuda cuda;
  ASSERT_NE(cuda.backend, nullptr) << cuda.reason;
  const std::string log_path = (std::filesystem::temp_directory_path() /
                                ("mate_device_fault_" + std::to_string(getpid()) + ".log")).string();
  ScopedOverride level{Var::MATE_LOGLEVEL, "3"};
  ScopedOverride dest{Var::MATE_LOGDEST, log_path};
  mate::log::reconfigure();
  mate::core::clear_recent_device_ranges();

  mate::guard::GuardAllocatorConfig config = cuda.config();
  config.on_corruption = mate::guard::OnCorruption::Continue;
  mate::guard::GuardAllocator guard(*cuda.backend, config);
  auto a = guard.allocate(1000);
  ASSERT_TRUE(a) << a.message;
  const std::uint64_t id = guard.describe(a.ptr).id;

  // 300 floats = 1200 bytes over a 1000-byte allocation: the "kernel" ran 200 bytes past its end.
  // The fault surfaces at the free's synchronize, so the report names the allocation as freed.
  std::int64_t shape[1] = {300};
  DLTensor x{};
  x.data = reinterpret_cast<void*>(a.ptr);
  x.device = {kDLCUDA, 0};
  x.ndim = 1;
  x.dtype = {kDLFloat, 32, 1};
  x.shape = shape;
  launch_scale(&x);

  set_sticky_error(mate::guard::kIllegalAddressError);
  ::testing::internal::CaptureStderr();
  guard.deallocate(a.ptr);
  const std::string err = ::testing::internal::GetCapturedStderr();
  set_sticky_error(0);
  mate::log::reconfigure();
  std::filesystem::remove(log_path);

  EXPECT_THAT(err, HasSubstr("mate guard: device fault: cuCtxSynchronize returned an illegal-address error (700)"));
  EXPECT_THAT(err, HasSubstr(" scale_kernel passed ["));
  EXPECT_THAT(err, HasSubstr("first byte: 0 bytes from the start of freed allocation #" + std::to_string(id) +
                             " of 1000 bytes"));
  EXPECT_THAT(err, HasSubstr("last byte: 199 bytes past the end of freed allocation #" + std::to_string(id)));
  EXPECT_THAT(err, HasSubstr("compute-sanitizer"));
  // Said once: the error is sticky, every later synchronize returns it again.
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(mate::guard::report_illegal_address(mate::guard::kIllegalAddressError, "again"));
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), Not(HasSubstr("device fault")));
}

// After a device fault every copy fails with the sticky error, so the canary cannot be read:
// the free and check_all must say so, never "canary intact" or a count of 0.
TEST(DeviceFault, CanaryThatCannotBeReadIsReportedNotChecked) {
  FakeCuda cuda;
  ASSERT_NE(cuda.backend, nullptr) << cuda.reason;
  mate::guard::GuardAllocatorConfig config = cuda.config();
  config.on_corruption = mate::guard::OnCorruption::Continue;
  config.log_allocations = true;
  mate::guard::GuardAllocator guard(*cuda.backend, config);
  auto a = guard.allocate(1000);
  ASSERT_TRUE(a) << a.message;
  auto b = guard.allocate(24);
  ASSERT_TRUE(b) << b.message;
  const std::string a_id = std::to_string(guard.describe(a.ptr).id);
  EXPECT_EQ(guard.check_all(), 0u);  // readable and intact before the fault

  set_sticky_error(mate::guard::kIllegalAddressError);
  ::testing::internal::CaptureStderr();
  const std::size_t not_intact = guard.check_all();
  const std::string check_err = ::testing::internal::GetCapturedStderr();
  ::testing::internal::CaptureStderr();
  const mate::guard::FreeResult freed = guard.deallocate(a.ptr);
  const std::string free_err = ::testing::internal::GetCapturedStderr();
  set_sticky_error(0);

  EXPECT_EQ(not_intact, 2u);
  EXPECT_THAT(check_err, HasSubstr("mate guard: canary not checked (check_all): allocation #" + a_id +
                                   " of 1000 bytes"));
  EXPECT_THAT(check_err, HasSubstr("MemcpyDtoH_v2 failed (error 700)"));
  EXPECT_EQ(freed, mate::guard::FreeResult::CanaryNotChecked);
  EXPECT_THAT(free_err, HasSubstr("mate guard: canary not checked at free: allocation #" + a_id));
  EXPECT_THAT(free_err, HasSubstr("mate guard: free #" + a_id));
  EXPECT_THAT(free_err, HasSubstr(" canary not checked: "));
  EXPECT_THAT(free_err, Not(HasSubstr("canary intact")));
  EXPECT_THAT(free_err, Not(HasSubstr("canary corrupted")));
  const mate::guard::Stats stats = guard.stats();
  EXPECT_EQ(stats.canary_unchecked, 3u);  // two in check_all, one at free
  EXPECT_EQ(stats.canary_failures, 0u);

  // Once the context is usable again the canary reads back intact.
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(guard.deallocate(b.ptr), mate::guard::FreeResult::Ok);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("canary intact"));
}

TEST(DeviceFault, OtherErrorsAreNotDeviceFaults) {
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(mate::guard::report_illegal_address(1, "cuCtxSynchronize"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(DeviceFault, RecentRangesAreBoundedNewestFirst) {
  mate::core::clear_recent_device_ranges();
  for (std::uintptr_t i = 0; i < mate::core::kRecentDeviceRanges + 5; ++i)
    mate::core::note_device_range("call", i, 0x1000 * (i + 1), 0x1000 * (i + 1) + 16);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(mate::guard::write_recent_ranges(2), mate::core::kRecentDeviceRanges);
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, HasSubstr("call #" + std::to_string(mate::core::kRecentDeviceRanges + 4) + " call"));
  EXPECT_THAT(out, Not(HasSubstr("call #4 call")));  // the oldest five were dropped
  EXPECT_LT(out.find("call #36 "), out.find("call #35 "));
  mate::core::clear_recent_device_ranges();
}

// Device memory from several threads at once, as a framework's allocator hook sees it (one
// thread a stream): canaries are filled and checked through the driver's copies and the
// allocator's host staging buffer while check_all() runs on another thread. Through the fake
// driver; under the tsan preset it checks the driver backend's and the staging buffer's locking.
TEST(DeviceMemory, ManyThreadsAllocateWriteAndFreeWhileAnotherChecksEveryCanary) {
  FakeCuda cuda;
  ASSERT_NE(cuda.backend, nullptr) << cuda.reason;
  mate::device::Backend* backend = cuda.backend.get();
  mate::guard::GuardAllocatorConfig config = cuda.config();
  config.quarantine_bytes = 64 * backend->granularity();
  mate::guard::GuardAllocator guard(*backend, config);
  std::atomic<int> failures{0};
  std::atomic<int> workers_left{3};
  std::atomic<bool> checking{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      while (!checking.load()) std::this_thread::yield();
      std::vector<std::uintptr_t> mine;
      for (int i = 0; i < 40; ++i) {
        const std::size_t size = static_cast<std::size_t>(1 + (i * 997 + t * 131) % 5000);
        auto r = guard.allocate(size);
        if (!r) {
          ++failures;
          continue;
        }
        const std::vector<unsigned char> bytes(size, static_cast<unsigned char>(t + 1));
        if (!backend->write(r.ptr, bytes.data(), size).ok()) ++failures;  // the "kernel" writes it all
        std::vector<unsigned char> back(size);
        if (!backend->read(back.data(), r.ptr, size).ok() || back != bytes) ++failures;
        mine.push_back(r.ptr);
        if (mine.size() > 4) {
          if (guard.deallocate(mine.front()) != mate::guard::FreeResult::Ok) ++failures;
          mine.erase(mine.begin());
        }
      }
      for (auto p : mine)
        if (guard.deallocate(p) != mate::guard::FreeResult::Ok) ++failures;
      workers_left.fetch_sub(1);
    });
  }
  int checks = 0;
  threads.emplace_back([&] {
    checking.store(true);
    do {
      if (guard.check_all() != 0) ++failures;  // every canary intact, whatever is live
      ++checks;
      // check_all holds the lock while it reads every canary: leave the workers room.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    } while (workers_left.load() > 0);
  });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(checks, 0);
  const auto s = guard.stats();
  EXPECT_EQ(s.allocations, 120u);
  EXPECT_EQ(s.frees, 120u);
  EXPECT_EQ(s.canary_failures, 0u);
}

// The bucket array grows with the stacks (it starts at one page): after many doublings every
// stack still has its handle, and storing it again finds it.
TEST(StackDepot, KeepsEveryStackFindableAsItGrows) {
  const std::uint32_t n = 20000;
  mate::guard::StackDepot depot(n);
  std::vector<std::uint32_t> handles;
  for (std::uint32_t i = 0; i < n; ++i) {
    void* frames[2] = {reinterpret_cast<void*>(std::uintptr_t{i} * 16 + 1), reinterpret_cast<void*>(std::uintptr_t{7})};
    handles.push_back(depot.put(frames, 2));
    ASSERT_EQ(handles.back(), i + 1);
  }
  for (std::uint32_t i = 0; i < n; i += 97) {
    void* frames[2] = {reinterpret_cast<void*>(std::uintptr_t{i} * 16 + 1), reinterpret_cast<void*>(std::uintptr_t{7})};
    EXPECT_EQ(depot.put(frames, 2), handles[i]);
    void* out[mate::guard::kMaxFrames];
    ASSERT_EQ(depot.get(handles[i], out), 2);
    EXPECT_EQ(out[0], frames[0]);
  }
  EXPECT_EQ(depot.size(), n);
}

// Frames are stored as varint distances: every address reads back exactly, whatever the
// distances (both directions, across the whole address space, at 64-bit extremes), and stacks
// that differ in one frame or only in length stay distinct.
TEST(StackDepot, StacksReadBackExactlyWhateverTheirAddresses) {
  mate::guard::StackDepot depot(64);
  const std::uintptr_t patterns[][mate::guard::kMaxFrames] = {
      {0x55d4c3a01234, 0x55d4c3a01000, 0x7f3a12345678, 0x55d4c3a0ffff, 0x7ffff7fd0000, 1, 0,
       0xffffffffffffffff, 0x8000000000000000, 0x7fffffffffffffff, 0x7f3a12345679, 0x7f3a12345677,
       0x400000, 0x400001, 0x3fffff, 0xffff800000000000},
      {0x55d4c3a01234, 0x55d4c3a01000, 0x7f3a12345678, 0x55d4c3a0ffff, 0x7ffff7fd0000, 1, 0,
       0xffffffffffffffff, 0x8000000000000000, 0x7fffffffffffffff, 0x7f3a12345679, 0x7f3a12345677,
       0x400000, 0x400001, 0x3fffff, 0xffff800000000001},
  };
  std::uint32_t handles[2][mate::guard::kMaxFrames + 1];
  for (int p = 0; p < 2; ++p)
    for (int count = 1; count <= mate::guard::kMaxFrames; ++count) {
      void* frames[mate::guard::kMaxFrames];
      for (int i = 0; i < count; ++i) frames[i] = reinterpret_cast<void*>(patterns[p][i]);
      handles[p][count] = depot.put(frames, count);
      ASSERT_NE(handles[p][count], 0u);
    }
  // Pattern 1 differs from 0 only in its 16th frame: the shorter stacks are the same ones.
  EXPECT_EQ(depot.size(), static_cast<std::uint32_t>(mate::guard::kMaxFrames + 1));
  for (int p = 0; p < 2; ++p)
    for (int count = 1; count <= mate::guard::kMaxFrames; ++count) {
      void* out[mate::guard::kMaxFrames];
      ASSERT_EQ(depot.get(handles[p][count], out), count);
      for (int i = 0; i < count; ++i) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(out[i]), patterns[p][i]) << p << " " << count << " " << i;
    }
  EXPECT_NE(handles[0][mate::guard::kMaxFrames], handles[1][mate::guard::kMaxFrames]);
}

// What the compression is for: a 16-frame stack of return addresses within one library (a few
// MiB apart, as a deep call path in one program is) takes at most 80 bytes, its entry included
// (fixed records took 144: 128 bytes of frames and a header).
TEST(StackDepot, AStackWithinOneLibraryTakesAtMost80Bytes) {
  mate::guard::StackDepot depot(1000);
  std::uint64_t x = 88172645463325252ull;
  for (int s = 0; s < 1000; ++s) {
    void* frames[mate::guard::kMaxFrames];
    for (int i = 0; i < mate::guard::kMaxFrames; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      frames[i] = reinterpret_cast<void*>(0x55d4c3a00000 + x % (8u << 20));  // an 8 MiB text
    }
    ASSERT_EQ(depot.put(frames, mate::guard::kMaxFrames), static_cast<std::uint32_t>(s + 1));
  }
  EXPECT_LE(depot.bytes_used(), 1000u * 80);
}

TEST(StackDepot, StoresEachDistinctStackOnce) {
  mate::guard::StackDepot depot(4);
  void* a[3] = {reinterpret_cast<void*>(1), reinterpret_cast<void*>(2), reinterpret_cast<void*>(3)};
  void* b[2] = {reinterpret_cast<void*>(1), reinterpret_cast<void*>(2)};
  const std::uint32_t ha = depot.put(a, 3);
  EXPECT_NE(ha, 0u);
  EXPECT_EQ(depot.put(a, 3), ha);
  const std::uint32_t hb = depot.put(b, 2);
  EXPECT_NE(hb, ha);
  EXPECT_EQ(depot.size(), 2u);
  void* out[mate::guard::kMaxFrames];
  ASSERT_EQ(depot.get(ha, out), 3);
  EXPECT_EQ(out[2], a[2]);
  EXPECT_EQ(depot.get(0, out), 0);
  EXPECT_EQ(depot.put(a, 0), 0u);
  // Full: a new stack gets no handle, known ones keep theirs.
  void* c[1] = {reinterpret_cast<void*>(7)};
  void* d[1] = {reinterpret_cast<void*>(8)};
  void* e[1] = {reinterpret_cast<void*>(9)};
  EXPECT_NE(depot.put(c, 1), 0u);
  EXPECT_NE(depot.put(d, 1), 0u);
  EXPECT_EQ(depot.put(e, 1), 0u);
  EXPECT_EQ(depot.put(b, 2), hb);
}

}  // namespace
