// The table walk (src/guard/table_unwinder.cpp) against the C++ unwinder: the same frames
// through the program, libc, libstdc++, threads and dlopen'd modules; rules cached; the walks it
// does not handle (signal frames, a library file replaced since it was loaded) left to the C++
// unwinder; the cache emptied when a module is unloaded.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <alloca.h>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "guard/stack/stack_capture.hpp"
#include "guard/stack/table_unwinder.hpp"
#include "guard_test_mode.hpp"
#include "temp_dir.hpp"

namespace {

using mate::guard::capture_stack;
using mate::guard::capture_stack_with_cxx_unwinder;
using mate::guard::table_unwinder_stats;
using mate::guard::TableUnwinderStats;

constexpr int kMax = 64;

struct Captured {
  void* table[kMax];
  int table_n = 0;
  void* cxx[kMax];
  int cxx_n = 0;
  TableUnwinderStats before{};
  TableUnwinderStats after{};  // around the table capture only
  int max = kMax;

  // Rules looked up: one a frame, but for the last when the walk stopped at `max`.
  std::uint64_t rules_needed() const { return static_cast<std::uint64_t>(table_n == max ? table_n - 1 : table_n); }
  std::uint64_t reads() const { return after.table_reads - before.table_reads; }
  std::uint64_t unsupported() const { return after.unsupported - before.unsupported; }
  // Frame 0 is the return address into capture_both (two call sites); the rest must agree.
  ::testing::AssertionResult same_frames() const {
    if (table_n != cxx_n) return ::testing::AssertionFailure() << "table walk " << table_n << " frames, C++ unwinder " << cxx_n;
    if (table_n < 2) return ::testing::AssertionFailure() << "only " << table_n << " frames";
    for (int i = 1; i < table_n; ++i)
      if (table[i] != cxx[i])
        return ::testing::AssertionFailure() << "frame " << i << ": table walk " << table[i] << ", C++ unwinder " << cxx[i];
    return ::testing::AssertionSuccess();
  }
};

__attribute__((noinline)) void capture_both(Captured* c, int max = kMax) {
  c->max = max;
  c->before = table_unwinder_stats();
  c->table_n = capture_stack(c->table, max);
  c->after = table_unwinder_stats();
  c->cxx_n = capture_stack_with_cxx_unwinder(c->cxx, max);
  asm volatile("" ::: "memory");
}

int capture_callback(void* arg) {
  capture_both(static_cast<Captured*>(arg));
  return 0;
}

// Frames of the test program: odd depths address their frame from rsp, even ones (alloca) from rbp.
__attribute__((noinline)) int descend(Captured* c, int depth, int max = kMax) {
  if (depth <= 0) {
    capture_both(c, max);
    return 1;
  }
  if (depth % 2 == 0) {
    auto* scratch = static_cast<volatile char*>(alloca(static_cast<unsigned>(depth) * 40));
    scratch[0] = 1;
    return descend(c, depth - 1, max) + scratch[0];
  }
  volatile int keep = 1;
  return descend(c, depth - 1, max) + keep;
}

// `count` walks from one call site each (the same return addresses every time).
__attribute__((noinline)) void descend_from_one_site(Captured* runs, int count, int depth) {
#pragma GCC unroll 1
  for (int i = 0; i < count; ++i) descend(&runs[i], depth);
}

// A frame too large for the rule cache's entry (over 32 KiB).
__attribute__((noinline)) int large_frame(Captured* c) {
  volatile char big[40 << 10];
  big[0] = 1;
  big[sizeof big - 1] = 2;
  capture_both(c);
  return big[0] + big[sizeof big - 1];
}

#if defined(__x86_64__)
// A function whose frame description is larger than the walk's stack buffer (2 KiB): 600
// push/pop pairs before its call, each changing the CFA offset twice (~4 KiB of CFA program), as
// the very large functions of a compiler (cc1plus: up to 20 KiB) have.
extern "C" __attribute__((noinline, used)) void capture_from_large_fde(Captured* c) { capture_both(c); }
extern "C" void call_through_large_fde(Captured* c);
asm(R"(
  .pushsection .text
  .p2align 4
  .type call_through_large_fde, @function
call_through_large_fde:
  .cfi_startproc
  push %rbx
  .cfi_adjust_cfa_offset 8
  .cfi_rel_offset %rbx, 0
  .rept 600
  push %rax
  .cfi_adjust_cfa_offset 8
  pop %rax
  .cfi_adjust_cfa_offset -8
  .endr
  call capture_from_large_fde
  pop %rbx
  .cfi_adjust_cfa_offset -8
  .cfi_restore %rbx
  ret
  .cfi_endproc
  .size call_through_large_fde, .-call_through_large_fde
  .popsection
)");
#endif

#if defined(__x86_64__)
constexpr bool kTableWalk = true;
#else
constexpr bool kTableWalk = false;
#endif

#define EXPECT_TABLE_WALK(c)                                              \
  do {                                                                    \
    EXPECT_TRUE((c).same_frames());                                       \
    if (kTableWalk) {                                                     \
      EXPECT_EQ((c).unsupported(), 0u);                                   \
    }                                                                     \
  } while (0)

TEST(TableUnwinder, MatchesTheCxxUnwinderThroughTheProgram) {
  for (int depth = 0; depth <= 24; ++depth) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    Captured c;
    descend(&c, depth);
    EXPECT_TABLE_WALK(c);
  }
}

TEST(TableUnwinder, StopsAtTheFramesAskedFor) {
  Captured all;
  descend(&all, 40);
  EXPECT_TABLE_WALK(all);
  EXPECT_GT(all.table_n, 40);
  Captured few;
  descend(&few, 40, 8);
  EXPECT_TABLE_WALK(few);
  EXPECT_EQ(few.table_n, 8);
}

TEST(TableUnwinder, MatchesThroughLibcCallbacks) {
  static Captured c;
  int values[] = {5, 3, 1, 4, 2};
  static int calls;
  calls = 0;
  std::qsort(values, 5, sizeof(int), [](const void* a, const void* b) {
    if (calls++ == 0) capture_both(&c);
    return *static_cast<const int*>(a) - *static_cast<const int*>(b);
  });
  EXPECT_TABLE_WALK(c);
}

TEST(TableUnwinder, MatchesOnOtherThreadsToTheirFirstFrame) {
  Captured c;
  std::thread([&] { descend(&c, 3); }).join();  // libstdc++'s thread start, libc's start_thread, clone3
  EXPECT_TABLE_WALK(c);
}

TEST(TableUnwinder, WalksLargeFramesWithoutCachingThem) {
  Captured first;
  Captured second;
  for (Captured* c : {&first, &second}) large_frame(c);
  EXPECT_TABLE_WALK(first);
  EXPECT_TABLE_WALK(second);
  // Sanitizer builds keep frame pointers: the frame's rule is then rbp + 16, which is cached.
  if (kTableWalk && !mate::testing::kSanitizerBuild) {
    EXPECT_GE(second.reads(), 1u) << "the large frame's rule is read again each time";
  }
}

#if defined(__x86_64__)
TEST(TableUnwinder, WalksThroughAFunctionWithALargeFrameDescription) {
  Captured c;
  call_through_large_fde(&c);
  EXPECT_TABLE_WALK(c);
  EXPECT_GE(c.table_n, 4);
}
#endif

TEST(TableUnwinder, CachesEachReturnAddressesRule) {
  mate::guard::clear_table_unwinder_cache();
  Captured runs[2];
  descend_from_one_site(runs, 2, 6);
  EXPECT_TABLE_WALK(runs[0]);
  EXPECT_TABLE_WALK(runs[1]);
  if (!kTableWalk) return;
  EXPECT_GT(runs[0].reads(), 0u) << "an empty cache: rules read";
  EXPECT_EQ(runs[1].reads(), 0u) << "every rule from the cache";
}

TEST(TableUnwinder, LeavesSignalFramesToTheCxxUnwinder) {
  static Captured runs[2];
  static int run;
  run = 0;
  struct sigaction action{};
  struct sigaction previous{};
  action.sa_handler = [](int) { descend_from_one_site(&runs[run], 1, 2); };
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &action, &previous), 0);
  for (run = 0; run < 2; ++run) raise(SIGUSR2);
  sigaction(SIGUSR2, &previous, nullptr);
  // The walk reaches the kernel's signal frame, answers "unsupported", and capture_stack gives
  // the C++ unwinder's frames, through the signal frame to the test.
  for (const Captured& c : runs) {
    EXPECT_TRUE(c.same_frames());
    if (kTableWalk) { EXPECT_EQ(c.unsupported(), 1u); }
    EXPECT_GT(c.table_n, 6);
  }
  // The second time the cache knows: no table is read again.
  if (kTableWalk) { EXPECT_EQ(runs[1].reads(), 0u); }
}

struct Module {
  void* handle = nullptr;
  using Probe = int (*)(int (*)(void*), void*, int);
  Probe probe = nullptr;
  explicit Module(const std::string& path) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) probe = reinterpret_cast<Probe>(dlsym(handle, "mate_unwind_probe"));
  }
  ~Module() {
    if (handle != nullptr) dlclose(handle);
  }
};

TEST(TableUnwinder, MatchesThroughADlopenedModule) {
  Module module(MATE_UNWIND_PROBE_MODULE_1);
  ASSERT_NE(module.probe, nullptr) << dlerror();
  Captured c;
  module.probe(capture_callback, &c, 7);
  EXPECT_TABLE_WALK(c);
  EXPECT_GT(c.table_n, 9);
}

TEST(TableUnwinder, DoesNotReadALibraryFileReplacedSinceItWasLoaded) {
  mate::testing::TempDir dir("mate_unwind");
  const auto path = dir / "libprobe.so";
  std::filesystem::copy_file(MATE_UNWIND_PROBE_MODULE_1, path);
  Module module(path.string());
  ASSERT_NE(module.probe, nullptr) << dlerror();
  // Rebuilt in place, as `make` does: a new file under the old name; the mapping keeps the old.
  std::filesystem::copy_file(MATE_UNWIND_PROBE_MODULE_2, dir / "new.so");
  std::filesystem::rename(dir / "new.so", path);
  mate::guard::clear_table_unwinder_cache();
  Captured c;
  module.probe(capture_callback, &c, 5);
  // The other file's tables would give other rules: the C++ unwinder walks instead.
  EXPECT_TRUE(c.same_frames());
  if (kTableWalk) { EXPECT_EQ(c.unsupported(), 1u); }
  EXPECT_GT(c.table_n, 7);
}

TEST(TableUnwinder, AFileThatCannotBeOpenedNowIsTriedAgainLater) {
  if (!kTableWalk) GTEST_SKIP() << "no table walk on this platform";
  Module module(MATE_UNWIND_PROBE_MODULE_1);
  ASSERT_NE(module.probe, nullptr) << dlerror();
  // Every file descriptor in use: the walk cannot open the module's file.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> taken;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) taken.push_back(fd);
  mate::guard::clear_table_unwinder_cache();
  Captured starved;
  module.probe(capture_callback, &starved, 3);
  for (int fd : taken) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_TRUE(starved.same_frames());  // from the C++ unwinder
  EXPECT_EQ(starved.unsupported(), 1u);
  // With descriptors free again the same return addresses are read, not remembered as unsupported.
  Captured later;
  module.probe(capture_callback, &later, 3);
  EXPECT_TABLE_WALK(later);
  EXPECT_GT(later.reads(), 0u);
}

TEST(TableUnwinder, UnloadingAModuleEmptiesTheCache) {
  Captured runs[3];
  descend_from_one_site(runs, 2, 2);
  if (kTableWalk) { EXPECT_EQ(runs[1].reads(), 0u); }
  {
    Module module(MATE_UNWIND_PROBE_MODULE_1);
    ASSERT_NE(module.probe, nullptr) << dlerror();
  }  // dlclose: another module may now be loaded where its code was
  descend_from_one_site(runs + 2, 1, 2);
  EXPECT_TABLE_WALK(runs[2]);
  if (kTableWalk) { EXPECT_EQ(runs[2].reads(), runs[2].rules_needed()) << "every rule read again"; }
}

TEST(TableUnwinder, ManyThreadsAgreeWithTheCxxUnwinder) {
  std::atomic<int> mismatches{0};
  std::atomic<int> walks{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        Captured c;
        descend(&c, (t * 7 + i) % 13);
        if (!c.same_frames()) mismatches.fetch_add(1);
        walks.fetch_add(1);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0) << "of " << walks.load() << " walks";
}

}  // namespace
