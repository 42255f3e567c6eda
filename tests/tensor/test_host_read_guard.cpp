// Reads of host memory that cannot be read: statistics and dumps get an error naming the
// address, the program goes on; faults elsewhere reach the program's own handler as before.
#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dl_tensor.hpp"
#include "mate/tensor/memory.hpp"
#include "mate/tensor/stats.hpp"
#include "tensor/host_read_guard.hpp"

namespace {

using namespace mate::tensor;
using mate::testing::dl_view;

const std::uintptr_t kPage = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));

// Two pages: the first readable, the second not (PROT_NONE, as a guard page); or both unmapped.
struct HalfReadable {
  unsigned char* base;
  explicit HalfReadable(bool unmap_both = false) {
    base = static_cast<unsigned char*>(::mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ::mprotect(base + kPage, kPage, PROT_NONE);
    if (unmap_both) ::munmap(base, 2 * kPage);
    unmapped = unmap_both;
  }
  ~HalfReadable() {
    if (!unmapped) ::munmap(base, 2 * kPage);
  }
  bool unmapped;
  std::uintptr_t second_page() const { return reinterpret_cast<std::uintptr_t>(base) + kPage; }
};

std::string hex(std::uintptr_t a) {
  char s[32];
  std::snprintf(s, sizeof s, "%#llx", static_cast<unsigned long long>(a));
  return s;
}

TEST(HostReadGuard, StatisticsOfMemoryThatCannotBeReadNameTheAddress) {
  HalfReadable freed(/*unmap_both=*/true);
  std::vector<std::int64_t> shape{256};
  StatsResult r = compute_stats(TensorView(dl_view(freed.base, ScalarType::F32, shape)));
  EXPECT_FALSE(r.stats);
  EXPECT_NE(r.unavailable.find("stats unavailable: host memory not readable at " + hex(reinterpret_cast<std::uintptr_t>(freed.base))),
            std::string::npos)
      << r.unavailable;
}

TEST(HostReadGuard, AFaultPartWayThroughIsReportedAtItsAddressContiguousAndStrided) {
  HalfReadable memory;
  // 2 pages of f32, the second unreadable; then every other element of the same span.
  const auto n = static_cast<std::int64_t>(2 * kPage / 4);
  std::vector<std::int64_t> shape{n}, half{n / 2}, two{2};
  for (const DLTensor& t : {dl_view(memory.base, ScalarType::F32, shape), dl_view(memory.base, ScalarType::F32, half, &two)}) {
    StatsResult r = compute_stats(TensorView(t));
    EXPECT_FALSE(r.stats);
    EXPECT_NE(r.unavailable.find("not readable at " + hex(memory.second_page())), std::string::npos) << r.unavailable;
  }
  // The readable page alone is fine (and the handler left nothing behind).
  std::vector<std::int64_t> first{static_cast<std::int64_t>(kPage / 4)};
  StatsResult ok = compute_stats(TensorView(dl_view(memory.base, ScalarType::F32, first)));
  ASSERT_TRUE(ok.stats) << ok.unavailable;
  EXPECT_EQ(ok.stats->max, 0.0);
}

TEST(HostReadGuard, ADumpCopyOfMemoryThatCannotBeReadIsAnError) {
  HalfReadable memory;
  const auto n = static_cast<std::int64_t>(2 * kPage);
  std::vector<std::int64_t> shape{n};
  const DLTensor t = dl_view(memory.base, ScalarType::U8, shape);
  std::size_t received = 0;
  auto sink = [](void* c, const void*, std::size_t bytes) {
    *static_cast<std::size_t*>(c) += bytes;
    return true;
  };
  const std::string error = copy_extent_out(TensorView(t), sink, &received);
  EXPECT_NE(error.find("host memory not readable at " + hex(memory.second_page())), std::string::npos) << error;
  EXPECT_EQ(received, 0u) << "nothing is passed on before the whole range is known readable";
  EXPECT_THROW(read_extent(TensorView(t)), std::runtime_error);
}

// The program's SIGSEGV handler, installed before MATE's: still called for faults that are not
// MATE's reads.
sigjmp_buf g_program_resume;
volatile sig_atomic_t g_program_handler_ran = 0;
void program_handler(int, siginfo_t*, void*) {
  g_program_handler_ran = 1;
  siglongjmp(g_program_resume, 1);
}

// In a fresh process (a death test run "threadsafe": the test binary executed again), where
// MATE's handler is not installed yet: the program's own comes first.
void program_handler_then_guarded_read_then_fault() {
  struct sigaction program {};
  program.sa_sigaction = program_handler;
  program.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&program.sa_mask);
  ::sigaction(SIGSEGV, &program, nullptr);
  HalfReadable memory;
  std::uintptr_t fault = 0;
  // MATE's handler installed (the first guarded read), and a guarded fault handled by it.
  if (detail::host_range_readable(reinterpret_cast<std::uintptr_t>(memory.base), memory.second_page() + kPage, fault)) _exit(2);
  if (fault != memory.second_page() || g_program_handler_ran) _exit(3);
  // A fault outside any guarded read: the program's handler.
  if (sigsetjmp(g_program_resume, 0) == 0) {
    (void)*reinterpret_cast<volatile unsigned char*>(memory.second_page());
    _exit(4);
  }
  _exit(g_program_handler_ran ? 0 : 5);
}

TEST(HostReadGuard, FaultsElsewhereStillReachTheHandlerInstalledBefore) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(program_handler_then_guarded_read_then_fault(), ::testing::ExitedWithCode(0), "");
}

void guarded_read_then_fault() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGSEGV, &dfl, nullptr);
  HalfReadable memory;
  std::uintptr_t fault = 0;
  (void)detail::host_range_readable(reinterpret_cast<std::uintptr_t>(memory.base), memory.second_page() + kPage, fault);
  (void)*reinterpret_cast<volatile unsigned char*>(memory.second_page());
  _exit(0);
}

TEST(HostReadGuard, AFaultElsewhereWithNoHandlerBeforeStillEndsTheProgramWithSigsegv) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(guarded_read_then_fault(), ::testing::KilledBySignal(SIGSEGV), "");
}

}  // namespace
