// `mate guard-run` as a user runs it: ordinary programs behave exactly as without it, the
// example heap bugs end with the report the guide shows, exit statuses pass through.
#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>

#include <filesystem>
#include <string>

#include "guard_test_mode.hpp"
#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace {

using mate::testing::run;
using ::testing::HasSubstr;

// The preload library is built with the sanitizers in the asan and tsan presets, and a
// sanitizer runtime cannot be preloaded into uninstrumented programs (it owns malloc), so these
// tests need a plain build.
using mate::testing::kSanitizerBuild;

class GuardRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kSanitizerBuild) GTEST_SKIP() << "mate guard-run's preload library cannot run under a sanitizer";
  }
};

const char* kPython = "import json; print(json.dumps(list(range(100000)))[:20])";

TEST_F(GuardRun, PythonBehavesIdentically) {
  auto plain = run({"python3", "-c", kPython});
  auto guarded = run({MATE_BINARY, "guard-run", "--", "python3", "-c", kPython});
  EXPECT_EQ(guarded.exit_code, plain.exit_code) << guarded.err;
  EXPECT_EQ(guarded.out, plain.out);
  EXPECT_EQ(guarded.out, "[0, 1, 2, 3, 4, 5, 6\n");
  EXPECT_EQ(guarded.err, plain.err);
}

TEST_F(GuardRun, SortBehavesIdentically) {
  mate::testing::RunOptions options;
  std::string input;
  for (int i = 0; i < 5000; ++i) input += std::to_string((i * 7919) % 5003) + "\n";
  options.stdin_text = input;
  auto plain = run({"sort", "-n"}, options);
  for (const char* mode : {"tail", "head"}) {
    auto guarded = run({MATE_BINARY, "guard-run", "--mode", mode, "--", "sort", "-n"}, options);
    EXPECT_EQ(guarded.exit_code, 0) << guarded.err;
    EXPECT_EQ(guarded.out, plain.out);
    EXPECT_EQ(guarded.err, "");
  }
}

TEST_F(GuardRun, ForkAndThreads) {
  // Threads allocating at once, then a fork whose child allocates and exits.
  const char* script =
      "import os, threading\n"
      "def work():\n"
      "    for i in range(2000): bytearray(100 + i % 700)\n"
      "ts = [threading.Thread(target=work) for _ in range(4)]\n"
      "[t.start() for t in ts]; [t.join() for t in ts]\n"
      "pid = os.fork()\n"
      "if pid == 0:\n"
      "    print('child', len(bytearray(5000))); os._exit(3)\n"
      "_, status = os.waitpid(pid, 0)\n"
      "print('parent', os.WEXITSTATUS(status))\n";
  auto r = run({MATE_BINARY, "guard-run", "--", "python3", "-c", script});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("child 5000"));
  EXPECT_THAT(r.out, HasSubstr("parent 3"));
}

TEST_F(GuardRun, TailModeReportsTheWritePastTheEnd) {
  auto r = run({MATE_BINARY, "guard-run", "--mode", "tail", "--", MATE_HEAP_BUG, "past"});
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_THAT(r.err, HasSubstr("0 bytes past the end of allocation #"));
  EXPECT_THAT(r.err, HasSubstr(" of 4000 bytes at ["));
  EXPECT_THAT(r.err, HasSubstr("(tail mode, host memory"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("sum")));
}

// The guarded program's own copy of MATE (API logging) registers the call in flight; the report,
// written by the preload library's copy, still names it (mate/core/crash_context.hpp).
TEST_F(GuardRun, ReportNamesTheApiCallInFlightInTheGuardedProgram) {
  mate::testing::RunOptions options;
  options.env["MATE_LOGLEVEL"] = "1";
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_LOG_CHILD, "overflow"}, options);
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  EXPECT_THAT(r.err, HasSubstr("0 bytes past the end of allocation #"));
  EXPECT_THAT(r.err, HasSubstr(" of 256 bytes at ["));
  EXPECT_THAT(r.err, HasSubstr("mate API call in flight on this thread: OverflowingOp.run #1\n"));
}

// The line after `heading` in a report: the first frame of that backtrace.
std::string first_frame_after(const std::string& report, const std::string& heading) {
  const auto at = report.find(heading);
  if (at == std::string::npos) return "";
  const auto start = report.find('\n', at) + 1;
  return report.substr(start, report.find('\n', start) - start);
}

// C++ new and delete reach the guard through libstdc++'s operator new/delete (which call malloc
// and free): guarded, reported with the program's line in the backtrace, and the failure rules
// of [new.delete] hold when the guard refuses a size.
TEST_F(GuardRun, CxxNewAndDeleteAreGuarded) {
  auto past = run({MATE_BINARY, "guard-run", "--", MATE_CXX_NEW_CHILD, "past"});
  EXPECT_EQ(past.exit_code, 128 + 11) << past.err;
  EXPECT_THAT(past.err, HasSubstr("0 bytes past the end of allocation #"));
  EXPECT_THAT(past.err, HasSubstr(" of 4000 bytes at ["));
  EXPECT_THAT(past.err, HasSubstr("cxx_new_child.cpp:"));

  auto stale = run({MATE_BINARY, "guard-run", "--", MATE_CXX_NEW_CHILD, "after_delete"});
  EXPECT_EQ(stale.exit_code, 128 + 11) << stale.err;
  EXPECT_THAT(stale.err, HasSubstr("mate guard: use-after-free"));
  const auto freed = stale.err.find("freed by thread");
  ASSERT_NE(freed, std::string::npos) << stale.err;
  EXPECT_NE(stale.err.find("cxx_new_child.cpp:", freed), std::string::npos) << stale.err;

  auto failures = run({MATE_BINARY, "guard-run", "--", MATE_CXX_NEW_CHILD, "failures"});
  EXPECT_EQ(failures.exit_code, 0) << failures.err;
  EXPECT_EQ(failures.out, "bad_alloc\nnothrow null\nhandler calls 1, then bad_alloc\n");

  auto aligned = run({MATE_BINARY, "guard-run", "--log-allocations", "--", MATE_CXX_NEW_CHILD, "aligned"});
  EXPECT_EQ(aligned.exit_code, 0) << aligned.err;
  EXPECT_EQ(aligned.out, "aligned 1\n");
  EXPECT_THAT(aligned.err, HasSubstr(" size 4096 mode tail host guard ["));
  EXPECT_THAT(aligned.err, HasSubstr(" size 4096 canary intact"));
}

TEST_F(GuardRun, BacktracesNameFunctionFileAndLine) {
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_HEAP_BUG, "past"});
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  const std::string first = first_frame_after(r.err, "allocated by thread");
  EXPECT_THAT(first, ::testing::StartsWith("    #0 0x")) << r.err;
  EXPECT_THAT(first, HasSubstr(" in main at ")) << r.err;
  EXPECT_THAT(first, HasSubstr("examples/guard_heap_bug.cpp:")) << r.err;
  EXPECT_THAT(first, HasSubstr("guard_heap_bug+0x")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("    #1 0x"));

  // The first frame is the program's for every entry point, not the preload's.
  for (const char* mode : {"realloc_past", "memalign_past"}) {
    auto other = run({MATE_BINARY, "guard-run", "--", MATE_CXX_NEW_CHILD, mode});
    EXPECT_EQ(other.exit_code, 128 + 11) << other.err;
    EXPECT_THAT(first_frame_after(other.err, "allocated by thread"), HasSubstr(" in main at ")) << mode << other.err;
  }

  mate::testing::RunOptions off;
  off.env["MATE_GUARD_SYMBOLIZE"] = "0";
  auto plain = run({MATE_BINARY, "guard-run", "--", MATE_HEAP_BUG, "past"}, off);
  EXPECT_THAT(first_frame_after(plain.err, "allocated by thread"), HasSubstr("guard_heap_bug(+0x")) << plain.err;
  EXPECT_THAT(plain.err, ::testing::Not(HasSubstr(" in main at ")));

  mate::testing::RunOptions no_symbolizer;
  no_symbolizer.env["PATH"] = "/nonexistent";
  auto fallback = run({MATE_BINARY, "guard-run", "--", MATE_HEAP_BUG, "past"}, no_symbolizer);
  EXPECT_EQ(fallback.exit_code, 128 + 11) << fallback.err;
  EXPECT_THAT(first_frame_after(fallback.err, "allocated by thread"), HasSubstr("guard_heap_bug(+0x")) << fallback.err;
}

TEST_F(GuardRun, HeadModeReportsTheUnderrun) {
  auto r = run({MATE_BINARY, "guard-run", "--mode", "head", "--", MATE_HEAP_BUG, "before"});
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: underrun: SIGSEGV on a write to "));
  EXPECT_THAT(r.err, HasSubstr("4 bytes before the start of allocation #"));
  EXPECT_THAT(r.err, HasSubstr(" of 4000 bytes at ["));
  EXPECT_THAT(r.err, HasSubstr("(head mode, host memory"));
}

TEST_F(GuardRun, TheOtherSideIsCaughtAtFreeWithAdvice) {
  auto r = run({MATE_BINARY, "guard-run", "--mode", "tail", "--", MATE_HEAP_BUG, "before"});
  EXPECT_EQ(r.exit_code, 128 + 6) << r.err;  // SIGABRT after the canary report
  EXPECT_THAT(r.err, HasSubstr("canary corrupted at free: allocation #"));
  EXPECT_THAT(r.err, HasSubstr("first corrupted byte: 4 bytes before the start"));
  EXPECT_THAT(r.err, HasSubstr("rerun in head mode (mate guard-run --mode head; --guard-mode head"));
}

TEST_F(GuardRun, FreeOfAPointerIntoABufferIsAnInvalidFree) {
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_HEAP_BUG, "free_inside"});
  EXPECT_EQ(r.exit_code, 128 + 6) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: invalid free of "));
  EXPECT_THAT(r.err, HasSubstr("it lies 4 bytes from the start of live allocation #"));
  EXPECT_THAT(r.err, HasSubstr(" of 4000 bytes at ["));
}

// realloc(p + 1) goes through the same check as free(p + 1), not to glibc's realloc.
TEST_F(GuardRun, ReallocOfAPointerIntoABufferIsAnInvalidFree) {
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_HEAP_BUG, "realloc_inside"});
  EXPECT_EQ(r.exit_code, 128 + 6) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: invalid free of "));
  EXPECT_THAT(r.err, HasSubstr("it lies 4 bytes from the start of live allocation #"));
  EXPECT_THAT(r.err, HasSubstr(" of 4000 bytes at ["));
}

TEST_F(GuardRun, DeviceAllocationsThroughTheFakeDriverAreGuarded) {
  mate::testing::RunOptions options;
  options.env["MATE_FAKE_DRIVER_PATH"] = MATE_FAKE_DRIVER_LIBRARY;
  auto ok = run({MATE_BINARY, "guard-run", "--log-allocations", "--", MATE_DEVICE_ALLOC_CHILD, "ok"}, options);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("done"));
  EXPECT_THAT(ok.err, HasSubstr(" size 1000 mode tail cuda guard ["));
  EXPECT_THAT(ok.err, HasSubstr(" size 500 mode tail cuda guard ["));
  EXPECT_THAT(ok.err, HasSubstr("size 1000 canary intact"));
  auto bad = run({MATE_BINARY, "guard-run", "--", MATE_DEVICE_ALLOC_CHILD, "overflow"}, options);
  EXPECT_EQ(bad.exit_code, 128 + 11) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_THAT(bad.err, HasSubstr("24 bytes past the end of allocation #1 of 1000 bytes"));
  EXPECT_THAT(bad.err, HasSubstr("(tail mode, cuda memory"));
  // Without guard-run the program finds no device entry points at all here (no toolkit).
  EXPECT_EQ(run({MATE_DEVICE_ALLOC_CHILD, "ok"}).exit_code, 3);
}

// A program on device 1 (its context current there, the runtime's current device 1, as after
// cudaSetDevice(1)) gets device 1's memory from both entry points, each guarded by device 1's
// allocator; the log and reports name the ordinal. (Before: device 0's memory, whatever the
// program's device: a kernel on device 1 would have faulted on it.) Then device 0, then a
// stream of device 1 (see device_alloc_child).
TEST_F(GuardRun, DeviceAllocationsGoToTheProgramsCurrentDevice) {
  mate::testing::RunOptions options;
  options.env["MATE_FAKE_DRIVER_PATH"] = MATE_FAKE_DRIVER_LIBRARY;
  options.env["FAKE_DRIVER_DEVICE_COUNT"] = "2";
  auto r = run({MATE_BINARY, "guard-run", "--log-allocations", "--", MATE_DEVICE_ALLOC_CHILD, "device1",
                MATE_FAKE_DRIVER_LIBRARY},
               options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("driver allocation on device 1\n"));
  EXPECT_THAT(r.out, HasSubstr("runtime allocation on device 1\n"));
  // The guard made no context on device 0 for them (one rank per GPU: none on GPU 0 but rank 0's).
  EXPECT_THAT(r.out, HasSubstr("device 0 contexts: 0\n"));
  // Device 0's guard (the process-wide one) starts after device 1's has mapped memory.
  EXPECT_THAT(r.out, HasSubstr("device 0 allocation on device 0\n"));
  // A stream-ordered allocation goes to its stream's device, whatever device is current.
  EXPECT_THAT(r.out, HasSubstr("stream allocation on device 1\n"));
  EXPECT_THAT(r.out, HasSubstr("done"));
  EXPECT_THAT(r.err, HasSubstr(" size 1000 mode tail cuda:1 guard ["));
  EXPECT_THAT(r.err, HasSubstr(" size 500 mode tail cuda:1 guard ["));
  EXPECT_THAT(r.err, HasSubstr(" size 700 mode tail cuda guard ["));
  EXPECT_THAT(r.err, HasSubstr(" size 300 mode tail cuda:1 guard ["));
  // Each block freed by its own device's guard (device 1's with device 0 current).
  for (const char* size : {"1000", "500", "700", "300"})
    EXPECT_THAT(r.err, HasSubstr(std::string("size ") + size + " canary intact")) << size;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("are not guarded")));
}

// Found on an H100 (docs/gpu-results.md): the program's own cuInit (libcudart's first call)
// gets a guarded host block from the driver; the guard's device set-up, later, runs the
// driver's context retain, which reallocates that block from inside the guard's set-up. The
// guard must still serve it (glibc's realloc of a guarded pointer aborted: "mremap_chunk():
// invalid pointer").
TEST_F(GuardRun, TheDriverReallocatesItsOwnGuardedBlockDuringTheGuardsDeviceSetUp) {
  mate::testing::RunOptions options;
  options.env["MATE_FAKE_DRIVER_PATH"] = MATE_FAKE_DRIVER_LIBRARY;
  for (const char* mode : {"tail", "head"}) {
    auto r = run({MATE_BINARY, "guard-run", "--mode", mode, "--log-allocations", "--", MATE_DEVICE_ALLOC_CHILD, "init-first",
                  MATE_FAKE_DRIVER_LIBRARY},
                 options);
    EXPECT_EQ(r.exit_code, 0) << mode << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("done"));
    // The driver's block was guarded (the case under test), then freed by the guard when moved.
    EXPECT_THAT(r.err, HasSubstr(std::string(" size 1000 mode ") + mode + " host guard ["));
    EXPECT_THAT(r.err, HasSubstr("size 1000 canary intact"));
    EXPECT_THAT(r.err, HasSubstr(std::string(" size 1000 mode ") + mode + " cuda guard ["));
  }
}

// Issue 4's "done when": a program built against the toolkit's runtime (cuda_runtime.h,
// libcudart) gets guarded allocations from the fake driver. The fake is also reachable as
// libcuda.so.1 (a symlink on LD_LIBRARY_PATH), the name libcudart loads the driver by.
TEST_F(GuardRun, ProgramBuiltAgainstLibcudartIsGuarded) {
#ifndef MATE_CUDART_ALLOC_CHILD
  GTEST_SKIP() << "the CUDA toolkit runtime was not found at configure time";
#else
  const mate::testing::TempDir dir("mate_cudart");
  std::filesystem::create_symlink(MATE_FAKE_DRIVER_LIBRARY, dir / "libcuda.so.1");
  mate::testing::RunOptions options;
  options.env["MATE_FAKE_DRIVER_PATH"] = MATE_FAKE_DRIVER_LIBRARY;
  options.env["LD_LIBRARY_PATH"] = dir.path;
  auto ok = run({MATE_BINARY, "guard-run", "--log-allocations", "--", MATE_CUDART_ALLOC_CHILD, "ok"}, options);
  auto bad = run({MATE_BINARY, "guard-run", "--", MATE_CUDART_ALLOC_CHILD, "overflow"}, options);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("done"));
  EXPECT_THAT(ok.err, HasSubstr("mate guard: alloc #1 user ["));
  EXPECT_THAT(ok.err, HasSubstr(" size 1000 mode tail cuda guard ["));
  EXPECT_THAT(ok.err, HasSubstr(" size 3000 mode tail cuda guard ["));
  EXPECT_THAT(ok.err, HasSubstr("free #2 user ["));
  EXPECT_THAT(ok.err, HasSubstr("size 3000 canary intact"));
  EXPECT_EQ(bad.exit_code, 128 + 11) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("72 bytes past the end of allocation #2 of 3000 bytes"));
  EXPECT_THAT(bad.err, HasSubstr("(tail mode, cuda memory"));
#endif
}

TEST_F(GuardRun, AlignmentAboveAPageIsGuarded) {
  auto r = run({MATE_BINARY, "guard-run", "--log-allocations", "--", MATE_HEAP_BUG, "aligned_past"});
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_THAT(r.err, HasSubstr("0 bytes past the end of allocation #"));
  EXPECT_THAT(r.err, HasSubstr(" of 65536 bytes at [0x"));
  // The user pointer the log shows is 64 KiB-aligned: its hex form ends in four zeros.
  EXPECT_THAT(r.err, ::testing::ContainsRegex(" user \\[0x[0-9a-f]*0000, 0x[0-9a-f]*\\) size 65536 mode tail"));
}

TEST_F(GuardRun, NoBacktracesLeavesTheStacksOutOfTheReport) {
  auto with = run({MATE_BINARY, "guard-run", "--", MATE_HEAP_BUG, "past"});
  EXPECT_THAT(with.err, HasSubstr("allocated by thread "));
  EXPECT_THAT(with.err, HasSubstr("guard_heap_bug+0x"));  // a frame of the program
  EXPECT_THAT(with.err, ::testing::Not(HasSubstr("no backtrace")));
  auto without = run({MATE_BINARY, "guard-run", "--no-backtraces", "--", MATE_HEAP_BUG, "past"});
  EXPECT_EQ(without.exit_code, 128 + 11) << without.err;
  EXPECT_THAT(without.err, HasSubstr("0 bytes past the end of allocation #"));
  EXPECT_THAT(without.err, HasSubstr("allocated by thread "));
  EXPECT_THAT(without.err, HasSubstr(": no backtrace (backtraces are off"));
  // No recorded stack; the access stack, taken at the fault, is still there.
  EXPECT_THAT(first_frame_after(without.err, "allocated by thread"), ::testing::Not(HasSubstr("guard_heap_bug+0x")));
  EXPECT_THAT(first_frame_after(without.err, "accessed by thread"), HasSubstr("guard_heap_bug+0x"));
  // The same through the variable; the flag wins over a variable that says 1.
  mate::testing::RunOptions off;
  off.env["MATE_GUARD_BACKTRACES"] = "0";
  EXPECT_THAT(run({MATE_BINARY, "guard-run", "--", MATE_HEAP_BUG, "past"}, off).err,
              HasSubstr(": no backtrace (backtraces are off"));
  mate::testing::RunOptions on;
  on.env["MATE_GUARD_BACKTRACES"] = "1";
  EXPECT_THAT(run({MATE_BINARY, "guard-run", "--no-backtraces", "--", MATE_HEAP_BUG, "past"}, on).err,
              HasSubstr(": no backtrace (backtraces are off"));
  mate::testing::RunOptions bad;
  bad.env["MATE_GUARD_BACKTRACES"] = "sometimes";
  auto rejected = run({MATE_BINARY, "guard-run", "--", "true"}, bad);
  EXPECT_EQ(rejected.exit_code, 2);
  EXPECT_THAT(rejected.err, HasSubstr("MATE_GUARD_BACKTRACES='sometimes' is invalid: not a boolean"));
  // The flag replaces the variable, whatever it says.
  EXPECT_EQ(run({MATE_BINARY, "guard-run", "--no-backtraces", "--", "true"}, bad).exit_code, 0);
}

// The preload adds no library of its own to a guarded program beyond the C++ runtime: every
// library loaded costs the program resident pages (bench/README.md "guard").
// A C program (cat) under guard-run maps no library but its own and the preload: the preload
// carries its C++ runtime inside (each library loaded costs the program hundreds of KiB of
// resident pages; bench/README.md "guard").
TEST_F(GuardRun, PreloadLoadsNoLibraryIntoACProgram) {
  auto r = run({MATE_BINARY, "guard-run", "--", "cat", "/proc/self/maps"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("libmate_guard_preload.so"));
  for (const char* library : {"libfmt", "libstdc++", "libm.so", "libgcc_s"})
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr(library))) << r.out;
}

// A program that registers unwind information for generated code (as JITs do) and walks through
// it: libgcc_s calls malloc under its own lock there, and the guarded malloc's backtrace must not
// take that lock again (tests/guard/jit_frames_child.cpp). The walk sees as many frames as without
// the guard.
TEST_F(GuardRun, AProgramRegisteringJitFramesDoesNotDeadlock) {
  auto plain = run({MATE_JIT_FRAMES_CHILD});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto guarded = run({MATE_BINARY, "guard-run", "--", MATE_JIT_FRAMES_CHILD});
  EXPECT_EQ(guarded.exit_code, 0) << guarded.err;
  EXPECT_EQ(guarded.out, plain.out);
}

// The preload's own initializers allocate (its C++ runtime's emergency exception pool, 72 KiB):
// those allocations are the library's, served by its arena, not a program's first guarded
// allocation. `true` in the C locale allocates nothing, so nothing is guarded.
TEST_F(GuardRun, ThePreloadsOwnInitializersAllocateNothingGuarded) {
  mate::testing::RunOptions options;
  options.env["LC_ALL"] = "C";
  auto r = run({MATE_BINARY, "guard-run", "--log-allocations", "--", "true"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("alloc #"))) << r.err;
}

// A bootstrap variable set by hand to a bad value (LD_PRELOAD without `mate guard-run`, which
// would have refused it) stops the program with the registry's message before it runs.
TEST_F(GuardRun, PreloadRefusesABadBootstrapValue) {
  mate::testing::RunOptions options;
  options.env["LD_PRELOAD"] = MATE_PRELOAD_LIBRARY;
  options.env["MATE_GUARD_ALLOCATOR_AUTO_INSTALL"] = "1";
  options.env["MATE_GUARD_ALLOCATOR_MODE"] = "sideways";
  auto r = run({"true"}, options);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("mate guard-run: MATE_GUARD_ALLOCATOR_MODE='sideways' is invalid: not a supported "
                               "choice; accepted: one of tail, head."));
  options.env["MATE_GUARD_ALLOCATOR_MODE"] = "HEAD";  // any case, as the registry reads it
  options.env["MATE_GUARD_MIN_BYTES"] = " 16 ";
  auto ok = run({"true"}, options);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.err, "");
}

// The guard's start-up and allocation path stay within one 64 KiB fault-around window of the
// preload's code (its resident code is memory every guarded process pays; a call from that path
// into device code once cost a second window, +64 KiB).
TEST_F(GuardRun, TheAllocationPathKeepsThePreloadsCodeInOneWindow) {
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_PRELOAD_TEXT_CHILD});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  long kib = -1;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "preload text KiB %ld", &kib), 1) << r.out;
  EXPECT_GT(kib, 0);
  EXPECT_LE(kib, 64) << "resident preload code grew past one fault-around window";
}

// A SIGSEGV or SIGBUS that a process sends (kill, raise) is no fault: it does what it does
// without the guard. Returning from the handler re-executes no access, so a default action must be
// re-raised, an ignored signal stays ignored, and the program's own handler runs.
TEST_F(GuardRun, SegvAndBusSentByAProcessActAsWithoutTheGuard) {
  EXPECT_EQ(run({MATE_BINARY, "guard-run", "--", "sh", "-c", "kill -SEGV $$; echo survived"}).exit_code, 128 + 11);
  EXPECT_EQ(run({MATE_BINARY, "guard-run", "--", "sh", "-c", "kill -BUS $$; echo survived"}).exit_code, 128 + 7);
  // Ignored before the program started (an ignored signal stays ignored across exec): the guard's
  // handler, installed over SIG_IGN, must ignore a sent one too.
  const std::string ignoring = std::string("trap '' SEGV; exec ") + MATE_BINARY +
                               " guard-run -- sh -c 'kill -SEGV $$; echo survived'";
  auto ignored = run({"sh", "-c", ignoring});
  EXPECT_EQ(ignored.exit_code, 0) << ignored.err;
  EXPECT_EQ(ignored.out, "survived\n");
  // The guard still reports a real fault after a sent signal was handled.
  auto fault = run({MATE_BINARY, "guard-run", "--", MATE_HEAP_BUG, "past"});
  EXPECT_THAT(fault.err, HasSubstr("overflow"));
}

// Ctrl-C on a terminal reaches the whole foreground job, mate and the program: mate must not pass
// it on a second time. Run on a new pseudo-terminal, the program counts the SIGINTs it gets.
TEST_F(GuardRun, CtrlCReachesTheProgramOnce) {
  const std::string terminal = R"(import os, pty, sys, time, select
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out, sent, deadline = b"", False, time.time() + 30
while time.time() < deadline:
    if select.select([fd], [], [], 0.1)[0]:
        try:
            data = os.read(fd, 1024)
        except OSError:
            break
        if not data:
            break
        out += data
    if not sent and b"ready" in out:
        os.write(fd, b"")
        sent = True
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
)";
  const std::string counter = R"(import signal, time
n = 0
def count(s, f):
    global n
    n += 1
signal.signal(signal.SIGINT, count)
print("ready", flush=True)
time.sleep(1.5)
print("SIGINTs received:", n, flush=True)
)";
  auto r = run({"python3", "-c", terminal, MATE_BINARY, "guard-run", "python3", "-c", counter});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("SIGINTs received: 1"));
}

// A kill to mate's pid from a process of its own group (a script's `kill $!`, Popen.terminate())
// reaches the program: the script ends at once with the program's signal, not when it is done.
TEST_F(GuardRun, KillToMatesPidFromItsOwnGroupReachesTheProgram) {
  const std::string script = std::string(MATE_BINARY) +
                             " guard-run -- sleep 30 & p=$!; sleep 0.5; kill $p; wait $p; echo rc=$?";
  const auto start = std::chrono::steady_clock::now();
  auto r = run({"sh", "-c", script});
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.out, "rc=143\n") << r.err;
  EXPECT_LT(seconds, 20.0);
}

// A signal ignored when mate starts (a background job's SIGINT) stays ignored in the program.
TEST_F(GuardRun, AnIgnoredSignalStaysIgnored) {
  const std::string ignoring = std::string("trap '' INT; exec ") + MATE_BINARY +
                               " guard-run python3 -c 'import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)'";
  auto r = run({"sh", "-c", ignoring});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "True\n");
}

// LD_PRELOAD cannot reach a statically linked program: guard-run says so rather than let a run
// that guarded nothing look clean.
TEST_F(GuardRun, AStaticallyLinkedProgramIsSaidToBeUnguarded) {
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_STATIC_CHILD});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "static program ran\n");
  EXPECT_THAT(r.err, HasSubstr("is statically linked: LD_PRELOAD cannot reach its allocator, so nothing in it is "
                               "guarded"));
  EXPECT_EQ(run({MATE_BINARY, "guard-run", "--", "true"}).err, "");  // a dynamic program: no word
}

// guard-run's options end at the program's name, as env's and nice's do: the rest is the program's.
TEST_F(GuardRun, OptionsEndAtTheProgramsName) {
  auto echoed = run({MATE_BINARY, "guard-run", "echo", "--mode", "head", "--", "x"});
  EXPECT_EQ(echoed.exit_code, 0) << echoed.err;
  EXPECT_EQ(echoed.out, "--mode head -- x\n");
  auto python = run({MATE_BINARY, "guard-run", "--mode", "head", "python3", "-c", "print(6 * 7)"});
  EXPECT_EQ(python.exit_code, 0) << python.err;
  EXPECT_EQ(python.out, "42\n");
  auto after_dashes = run({MATE_BINARY, "guard-run", "--mode=head", "--", "echo", "--", "y"});
  EXPECT_EQ(after_dashes.out, "-- y\n");
  auto unknown = run({MATE_BINARY, "guard-run", "--bogus", "echo"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("--bogus"));
  auto nothing = run({MATE_BINARY, "guard-run", "--mode", "head"});
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_THAT(nothing.err, HasSubstr("command is required"));
}

// The allocation functions' edge cases answer as the C library's do: odd memalign alignments
// rounded up, pvalloc of a size that would wrap refused, posix_memalign's EINVAL.
TEST_F(GuardRun, LibcEdgeCasesAnswerAsTheCLibraryDoes) {
  auto plain = run({MATE_LIBC_EDGES_CHILD});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("memalign(3, 10): ok aligned to 4: yes"));
  EXPECT_THAT(plain.out, HasSubstr("pvalloc(SIZE_MAX - 10): null errno ENOMEM"));
  for (const char* mode : {"tail", "head"}) {
    auto guarded = run({MATE_BINARY, "guard-run", "--mode", mode, "--", MATE_LIBC_EDGES_CHILD});
    EXPECT_EQ(guarded.exit_code, 0) << guarded.err;
    EXPECT_EQ(guarded.out, plain.out) << mode;
  }
}

// malloc_usable_size(p + 1) of a guarded buffer is reported as free(p + 1) is; glibc would read
// the canary before it as a chunk header.
TEST_F(GuardRun, UsableSizeOfAPointerIntoABufferIsReported) {
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_LIBC_EDGES_CHILD, "usable_inside"});
  EXPECT_EQ(r.exit_code, 128 + 6) << r.err;
  EXPECT_THAT(r.err, HasSubstr("passed to malloc_usable_size: not a pointer this allocator returned; it lies 1 "
                               "bytes from the start of live allocation #"));
  EXPECT_THAT(r.err, HasSubstr(" in main at "));
}

TEST_F(GuardRun, LogAllocationsCorrelatesIds) {
  auto r = run({MATE_BINARY, "guard-run", "--log-allocations", "--", MATE_HEAP_BUG, "past"});
  EXPECT_THAT(r.err, HasSubstr("mate guard: alloc #"));
  EXPECT_THAT(r.err, HasSubstr(" size 4000 mode tail host guard ["));
}

TEST_F(GuardRun, ExitStatusAndErrors) {
  EXPECT_EQ(run({MATE_BINARY, "guard-run", "--", "sh", "-c", "exit 7"}).exit_code, 7);
  EXPECT_EQ(run({MATE_BINARY, "guard-run", "--", "sh", "-c", "kill -TERM $$"}).exit_code, 128 + 15);
  auto missing = run({MATE_BINARY, "guard-run", "--", "no-such-program-mate"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_THAT(missing.err, HasSubstr("cannot run 'no-such-program-mate'"));
  auto bad = run({MATE_BINARY, "guard-run", "--mode", "middle", "--", "true"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("middle"));
  mate::testing::RunOptions options;
  options.env["MATE_GUARD_MIN_BYTES"] = "-5";
  auto bad_min = run({MATE_BINARY, "guard-run", "--", "true"}, options);
  EXPECT_EQ(bad_min.exit_code, 2);
  EXPECT_THAT(bad_min.err, HasSubstr("MATE_GUARD_MIN_BYTES"));
}

TEST_F(GuardRun, MinBytesLeavesSmallAllocationsUnguarded) {
  mate::testing::RunOptions options;
  options.env["MATE_GUARD_MIN_BYTES"] = "5000";
  auto r = run({MATE_BINARY, "guard-run", "--log-allocations", "--", MATE_HEAP_BUG, "past"}, options);
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("size 4000 mode")));
}

// The guard's own allocations (config parsing, the unwinder, the preload's start-up) come from
// the preload's arena: glibc's allocator is never started in a guarded process, which would cost
// its code pages and heap in every process (bench/README.md "guard").
TEST_F(GuardRun, GuardBookkeepingNeverStartsGlibcAllocator) {
  auto plain = run({MATE_GLIBC_HEAP_CHILD});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, ::testing::Not(HasSubstr("glibc heap 0 ")));  // the probe sees glibc's heap
  for (const char* mode : {"tail", "head"}) {
    auto guarded = run({MATE_BINARY, "guard-run", "--mode", mode, "--", MATE_GLIBC_HEAP_CHILD});
    EXPECT_EQ(guarded.exit_code, 0) << guarded.err;
    EXPECT_EQ(guarded.out, "glibc heap 0 mmapped 0\n") << mode;
  }
  // Allocations the guard leaves to the real allocator do reach glibc's heap.
  mate::testing::RunOptions options;
  options.env["MATE_GUARD_MIN_BYTES"] = "100000";
  auto unguarded = run({MATE_BINARY, "guard-run", "--", MATE_GLIBC_HEAP_CHILD}, options);
  EXPECT_EQ(unguarded.exit_code, 0) << unguarded.err;
  EXPECT_THAT(unguarded.out, ::testing::Not(HasSubstr("glibc heap 0 ")));
}

// A program with more live allocations than the system allows memory-map entries: the guard says
// once that it stops guarding, the rest go to the real allocator, and the program runs to the
// end as without the guard.
TEST_F(GuardRun, ProgramPastTheMapLimitRunsOnUnguarded) {
  long max_map_count = 0;
  if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    if (std::fscanf(f, "%ld", &max_map_count) != 1) max_map_count = 0;
    std::fclose(f);
  }
  if (max_map_count <= 0 || max_map_count > 262144)
    GTEST_SKIP() << "vm.max_map_count is " << max_map_count << ": too many allocations to reach it here";
  // A guarded allocation costs at least one map entry: this many cannot all be guarded.
  const std::string count = std::to_string(max_map_count + 1000);
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_MAP_LIMIT_CHILD, count});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err.substr(0, 2000);
  EXPECT_EQ(r.out, "ok " + count + "\n");
  // Small blocks stop at their share of the entries (MATE_GUARD_SMALL_SHARE), long before the
  // system refuses: the rest is for larger blocks and the reserve the program's own (the child
  // starts new threads past that point). Said once.
  EXPECT_THAT(r.err, HasSubstr("mate guard: memory map entries are getting short"));
  EXPECT_THAT(r.err, HasSubstr("vm.max_map_count"));
  EXPECT_EQ(r.err.find("getting short"), r.err.rfind("getting short"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("refused another mapping")));
}

}  // namespace
