// Reads of host memory that cannot be read: statistics and dumps get an error naming the
// address, the program goes on; faults elsewhere reach the program's own handler as before.
#include <gtest/gtest.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <cstdint>
#include <string>
#include <vector>

#include "dl_tensor.hpp"
#include "guard_test_mode.hpp"
#include "mate/tensor/memory.hpp"
#include "mate/tensor/stats.hpp"
#include "tensor/host_read_guard.hpp"

namespace {

using namespace mate::tensor;
using mate::testing::dl_view;

const std::uintptr_t kPage = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));

// Two pages: the first readable, the second not (PROT_NONE, as a guard page); or neither.
// Reserved, not unmapped: an unmapped range could be mapped again by anything meanwhile.
struct HalfReadable {
  unsigned char* base;
  explicit HalfReadable(bool neither = false) {
    base = static_cast<unsigned char*>(::mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ::mprotect(neither ? base : base + kPage, neither ? 2 * kPage : kPage, PROT_NONE);
  }
  ~HalfReadable() { ::munmap(base, 2 * kPage); }
  std::uintptr_t first_page() const { return reinterpret_cast<std::uintptr_t>(base); }
  std::uintptr_t second_page() const { return first_page() + kPage; }
};

// The address in "... not readable at 0x... ": where the read faulted, which depends on the
// order the compiler issues loads in, so tests ask which page it is in.
std::uintptr_t reported_address(const std::string& message) {
  const std::string at = "not readable at ";
  const std::size_t i = message.find(at);
  if (i == std::string::npos) return 0;
  return static_cast<std::uintptr_t>(std::stoull(message.substr(i + at.size()), nullptr, 16));
}
bool in_page(std::uintptr_t address, std::uintptr_t page) { return address >= page && address < page + kPage; }

std::string hex(std::uintptr_t a) {
  char s[32];
  std::snprintf(s, sizeof s, "%#llx", static_cast<unsigned long long>(a));
  return s;
}

TEST(HostReadGuard, StatisticsOfMemoryThatCannotBeReadNameTheAddress) {
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
  HalfReadable gone(/*neither=*/true);
  std::vector<std::int64_t> shape{256};
  for (ScalarType type : {ScalarType::F32, ScalarType::BF16, ScalarType::F8E4M3, ScalarType::I64}) {
    StatsResult r = compute_stats(TensorView(dl_view(gone.base, type, shape)));
    EXPECT_FALSE(r.stats);
    EXPECT_EQ(r.unavailable.rfind("stats unavailable: host memory not readable at 0x", 0), 0u) << r.unavailable;
    EXPECT_TRUE(in_page(reported_address(r.unavailable), gone.first_page())) << r.unavailable;
    EXPECT_NE(r.unavailable.find("(the tensor spans [" + hex(gone.first_page()) + ", "), std::string::npos) << r.unavailable;
  }
}

// Wild pointers: garbage in the high bits (a general protection fault, no address given), and
// the last page of the address space. (A range that would wrap around past it is an invalid
// layout, read by nothing: TensorView.AnAddressRangeThatWrapsIsInvalid.)
TEST(HostReadGuard, WildPointersAreNotReadableNotACrash) {
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
  std::vector<std::int64_t> shape{256};
  for (std::uintptr_t wild : {std::uintptr_t{0xdead000000000000}, std::uintptr_t{0xbebebebebebebebe}, ~std::uintptr_t{0xfff}}) {
    StatsResult r = compute_stats(TensorView(dl_view(reinterpret_cast<void*>(wild), ScalarType::F32, shape)));
    EXPECT_FALSE(r.stats);
    EXPECT_NE(r.unavailable.find("not readable at " + hex(wild)), std::string::npos) << r.unavailable;
    std::vector<std::int64_t> bytes{1024};  // more from ~0xfff would wrap around: an invalid layout
    const std::string error = copy_extent_out(TensorView(dl_view(reinterpret_cast<void*>(wild), ScalarType::U8, bytes)),
                                              [](void*, const void*, std::size_t) { return true; }, nullptr);
    EXPECT_NE(error.find("host memory not readable at " + hex(wild)), std::string::npos) << error;
  }
}

// A caught fault leaves the thread's floating-point controls as they were (a signal handler
// starts with the initial ones, and leaving it by siglongjmp does not bring them back).
TEST(HostReadGuard, TheThreadsFloatingPointControlsSurviveACaughtFault) {
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
#if defined(__x86_64__)
  HalfReadable gone(/*neither=*/true);
  const unsigned saved_mxcsr = _mm_getcsr();
  unsigned short saved_cw = 0, cw = 0;
  asm volatile("fnstcw %0" : "=m"(saved_cw));
  const unsigned mxcsr = (saved_mxcsr & ~0x6000u) | 0x8040u | 0x4000u;  // FTZ, DAZ, round up
  const unsigned short x87 = static_cast<unsigned short>((saved_cw & ~0x0c00u) | 0x0800u);  // round up
  _mm_setcsr(mxcsr);
  asm volatile("fldcw %0" : : "m"(x87));
  std::uintptr_t fault = 0;
  const bool readable = detail::host_range_readable(gone.first_page(), gone.first_page() + kPage, fault);
  const unsigned mxcsr_after = _mm_getcsr();
  asm volatile("fnstcw %0" : "=m"(cw));
  _mm_setcsr(saved_mxcsr);
  asm volatile("fldcw %0" : : "m"(saved_cw));
  EXPECT_FALSE(readable);
  EXPECT_EQ(mxcsr_after & ~0x3fu, mxcsr & ~0x3fu) << std::hex << mxcsr_after;  // flags aside
  EXPECT_EQ(cw, x87) << std::hex << cw;
#else
  GTEST_SKIP() << "x86-64 controls";
#endif
}

TEST(HostReadGuard, AFaultPartWayThroughIsReportedAtItsAddressContiguousAndStrided) {
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
  HalfReadable memory;
  // 2 pages of f32, the second unreadable; then every other element of the same span.
  const auto n = static_cast<std::int64_t>(2 * kPage / 4);
  std::vector<std::int64_t> shape{n}, half{n / 2}, two{2};
  for (const DLTensor& t : {dl_view(memory.base, ScalarType::F32, shape), dl_view(memory.base, ScalarType::F32, half, &two)}) {
    StatsResult r = compute_stats(TensorView(t));
    EXPECT_FALSE(r.stats);
    EXPECT_TRUE(in_page(reported_address(r.unavailable), memory.second_page())) << r.unavailable;
  }
  // The readable page alone is fine (and the handler left nothing behind).
  std::vector<std::int64_t> first{static_cast<std::int64_t>(kPage / 4)};
  StatsResult ok = compute_stats(TensorView(dl_view(memory.base, ScalarType::F32, first)));
  ASSERT_TRUE(ok.stats) << ok.unavailable;
  EXPECT_EQ(ok.stats->max, 0.0);
}

TEST(HostReadGuard, ADumpCopyOfMemoryThatCannotBeReadIsAnError) {
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
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
  EXPECT_EQ(error.rfind("host memory not readable at ", 0), 0u) << error;
  EXPECT_TRUE(in_page(reported_address(error), memory.second_page())) << error;
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
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(program_handler_then_guarded_read_then_fault(), ::testing::ExitedWithCode(0), "");
}

// The mask the program's handler runs with, passed on by MATE's: what the kernel would have
// given it (the interrupted code's mask, its sa_mask, and SIGSEGV itself unless SA_NODEFER).
volatile sig_atomic_t g_segv_blocked = -1, g_usr1_blocked = -1, g_usr2_blocked = -1;
void mask_recording_handler(int, siginfo_t*, void*) {
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, nullptr, &now);
  g_segv_blocked = sigismember(&now, SIGSEGV);
  g_usr1_blocked = sigismember(&now, SIGUSR1);
  g_usr2_blocked = sigismember(&now, SIGUSR2);
  siglongjmp(g_program_resume, 1);
}

// flags: the program's sa_flags besides SA_SIGINFO; segv_in_mask: SIGSEGV in its sa_mask too.
// Exits 0 when SIGSEGV's blocked state is `segv_blocked`, SIGUSR1 (in sa_mask) is blocked and
// SIGUSR2 (in neither) is not.
void handler_mask_after_guarded_read(int flags, bool segv_in_mask, int segv_blocked) {
  struct sigaction program {};
  program.sa_sigaction = mask_recording_handler;
  program.sa_flags = SA_SIGINFO | flags;
  sigemptyset(&program.sa_mask);
  sigaddset(&program.sa_mask, SIGUSR1);
  if (segv_in_mask) sigaddset(&program.sa_mask, SIGSEGV);
  ::sigaction(SIGSEGV, &program, nullptr);
  HalfReadable memory;
  std::uintptr_t fault = 0;
  if (detail::host_range_readable(reinterpret_cast<std::uintptr_t>(memory.base), memory.second_page() + kPage, fault)) _exit(2);
  // sigsetjmp saving the mask: the handler's siglongjmp then puts the interrupted one back.
  if (sigsetjmp(g_program_resume, 1) == 0) {
    (void)*reinterpret_cast<volatile unsigned char*>(memory.second_page());
    _exit(3);
  }
  if (g_segv_blocked != segv_blocked) _exit(4);
  if (g_usr1_blocked != 1) _exit(5);
  if (g_usr2_blocked != 0) _exit(6);
  _exit(0);
}

TEST(HostReadGuard, TheHandlerInstalledBeforeRunsWithTheMaskTheKernelWouldGiveIt) {
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(handler_mask_after_guarded_read(0, false, 1), ::testing::ExitedWithCode(0), "") << "plain";
  EXPECT_EXIT(handler_mask_after_guarded_read(SA_NODEFER, false, 0), ::testing::ExitedWithCode(0), "") << "SA_NODEFER";
  EXPECT_EXIT(handler_mask_after_guarded_read(SA_NODEFER, true, 1), ::testing::ExitedWithCode(0), "")
      << "SA_NODEFER with SIGSEGV in sa_mask";
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
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(guarded_read_then_fault(), ::testing::KilledBySignal(SIGSEGV), "");
}

// A signal sent to a program that ignores SIGSEGV stays ignored once MATE's handler is there.
void ignored_then_sent() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGSEGV, &ignore, nullptr);
  HalfReadable gone(/*neither=*/true);
  std::uintptr_t fault = 0;
  if (detail::host_range_readable(gone.first_page(), gone.first_page() + kPage, fault)) _exit(2);
  ::kill(::getpid(), SIGSEGV);
  _exit(0);
}

TEST(HostReadGuard, ASentSignalTheProgramIgnoresStaysIgnored) {
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ignored_then_sent(), ::testing::ExitedWithCode(0), "");
}

// A one-shot handler (SA_RESETHAND) that returns: run once, then the default action ends the
// program at the re-executed access (not the handler again and again).
void one_shot_handler(int) {
  static const char kRan[] = "one-shot handler ran\n";
  (void)!::write(2, kRan, sizeof kRan - 1);
}

void one_shot_then_fault() {
  struct sigaction once {};
  once.sa_handler = one_shot_handler;
  once.sa_flags = SA_RESETHAND;
  sigemptyset(&once.sa_mask);
  ::sigaction(SIGSEGV, &once, nullptr);
  HalfReadable gone(/*neither=*/true);
  std::uintptr_t fault = 0;
  if (detail::host_range_readable(gone.first_page(), gone.first_page() + kPage, fault)) _exit(2);
  (void)*reinterpret_cast<volatile unsigned char*>(gone.first_page());
  _exit(0);
}

TEST(HostReadGuard, AOneShotHandlerBeforeRunsOnceThenTheDefaultAction) {
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(one_shot_then_fault(), ::testing::KilledBySignal(SIGSEGV), "^one-shot handler ran\n$");
}

}  // namespace
