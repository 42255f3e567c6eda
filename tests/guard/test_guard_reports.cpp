// What a guard report shows and where it goes, run as a user runs `mate guard-run`: the access
// stack (frame #0 the faulting instruction), "allocated by" and "freed by"; the free that found a
// bad canary; frames in a library without debug information; the report first whatever SIGSEGV
// handler the program installs, then the program's handler; the report on the stderr the program
// started with, and in --report-file; pytest running a test that overflows a numpy array.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "guard_test_mode.hpp"
#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace {

using mate::testing::run;
using ::testing::HasSubstr;
using ::testing::Not;

// The preload library cannot run under a sanitizer (test_guard_run.cpp).
class GuardReports : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mate::testing::kSanitizerBuild) GTEST_SKIP() << "mate guard-run's preload library cannot run under a sanitizer";
  }
};

// The lines of the backtrace under the heading that starts with `heading` ("  accessed by
// thread"), up to the next line that is not a frame.
std::vector<std::string> frames_after(const std::string& report, const std::string& heading) {
  std::vector<std::string> frames;
  const auto at = report.find("\n" + heading);
  if (at == std::string::npos) return frames;
  std::size_t start = report.find('\n', at + 1) + 1;
  while (start < report.size() && report.compare(start, 5, "    #") == 0) {
    const auto end = report.find('\n', start);
    frames.push_back(report.substr(start, end - start));
    start = end + 1;
  }
  return frames;
}

std::string first_frame(const std::string& report, const std::string& heading) {
  const auto frames = frames_after(report, heading);
  return frames.empty() ? "" : frames[0];
}

TEST_F(GuardReports, TheAccessStackNamesTheWritingFunctionFirst) {
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "past"});
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_THAT(r.err, HasSubstr("0 bytes past the end of allocation #"));
  // As GWP-ASan and AddressSanitizer: the access first, then where the memory came from.
  const auto accessed = r.err.find("\n  accessed by thread ");
  const auto allocated = r.err.find("\n  allocated by thread ");
  ASSERT_NE(accessed, std::string::npos) << r.err;
  ASSERT_NE(allocated, std::string::npos) << r.err;
  EXPECT_LT(accessed, allocated);
  EXPECT_THAT(r.err, HasSubstr("  accessed by thread " ));
  EXPECT_THAT(r.err, HasSubstr(" (report_child)\n"));  // the thread's name
  const std::string frame0 = first_frame(r.err, "  accessed by thread");
  EXPECT_THAT(frame0, ::testing::StartsWith("    #0 0x")) << r.err;
  EXPECT_THAT(frame0, HasSubstr(" in (anonymous namespace)::write_one_past_the_end(char*, unsigned long) at "))
      << r.err;
  EXPECT_THAT(frame0, HasSubstr("report_child.cpp:")) << r.err;
  const auto accessed_frames = frames_after(r.err, "  accessed by thread");
  ASSERT_GE(accessed_frames.size(), 2u) << r.err;
  EXPECT_THAT(accessed_frames[1], HasSubstr(" in main at ")) << r.err;
  EXPECT_THAT(first_frame(r.err, "  allocated by thread"), HasSubstr("allocate_buffer")) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("freed by thread")));

  // Without the symbolizer the frames are still there, as module+offset.
  mate::testing::RunOptions plain;
  plain.env["MATE_GUARD_SYMBOLIZE"] = "0";
  auto unsymbolized = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "past"}, plain);
  const auto heading = unsymbolized.err.find("\n  accessed by thread ");
  ASSERT_NE(heading, std::string::npos) << unsymbolized.err;
  const auto line = unsymbolized.err.find('\n', heading + 1) + 1;
  EXPECT_EQ(unsymbolized.err.compare(line, 0, ""), 0);
  EXPECT_THAT(unsymbolized.err.substr(line, unsymbolized.err.find('\n', line) - line), HasSubstr("report_child(+0x"))
      << unsymbolized.err;
}

// A faulting frame the table unwinder does not handle (its CFA in r12): the C++ unwinder walks
// through the signal frame and the stack the report runs on, and gives the same frames.
TEST_F(GuardReports, TheAccessStackCrossesFramesTheTableWalkLeavesToTheCxxUnwinder) {
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "past_from_odd_frame"});
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  const auto frames = frames_after(r.err, "  accessed by thread");
  ASSERT_GE(frames.size(), 2u) << r.err;
  EXPECT_THAT(frames[0], HasSubstr(" in report_child_write_with_odd_frame+0x")) << r.err;
  EXPECT_THAT(frames[1], HasSubstr(" in main at ")) << r.err;
}

// The handler runs on the thread's alternate signal stack when it has one; the report does not
// overflow a small one.
TEST_F(GuardReports, TheWholeReportFitsASmallAlternateSignalStack) {
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "past_on_small_signal_stack"});
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  EXPECT_THAT(first_frame(r.err, "  accessed by thread"), HasSubstr("write_one_past_the_end")) << r.err;
  EXPECT_THAT(first_frame(r.err, "  allocated by thread"), HasSubstr("allocate_buffer")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: the tail mode guard region caught the first invalid access past the end"));
}

TEST_F(GuardReports, AUseAfterFreeShowsTheAccessTheAllocationAndTheFree) {
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "use_after_free"});
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: use-after-free: SIGSEGV on a read of "));
  EXPECT_THAT(first_frame(r.err, "  accessed by thread"), HasSubstr("read_after_free")) << r.err;
  EXPECT_THAT(first_frame(r.err, "  allocated by thread"), HasSubstr("allocate_buffer")) << r.err;
  EXPECT_THAT(first_frame(r.err, "  freed by thread"), HasSubstr("release_buffer")) << r.err;
  const auto accessed = r.err.find("\n  accessed by thread ");
  const auto allocated = r.err.find("\n  allocated by thread ");
  const auto freed = r.err.find("\n  freed by thread ");
  EXPECT_LT(accessed, allocated);
  EXPECT_LT(allocated, freed);
}

// A canary found corrupted at free: the report shows the free that found it.
TEST_F(GuardReports, ACanaryReportShowsTheFreeThatFoundIt) {
  auto r = run({MATE_BINARY, "guard-run", "--mode", "tail", "--", MATE_REPORT_CHILD, "canary"});
  EXPECT_EQ(r.exit_code, 128 + 6) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: canary corrupted at free: allocation #"));
  EXPECT_THAT(first_frame(r.err, "  freed by thread"), HasSubstr("release_buffer")) << r.err;
  EXPECT_THAT(first_frame(r.err, "  allocated by thread"), HasSubstr("allocate_buffer")) << r.err;
  EXPECT_LT(r.err.find("\n  freed by thread "), r.err.find("\n  allocated by thread "));
}

// A frame in code without debug information is named only by a symbol that contains it: the
// nearest exported function below it is another function.
TEST_F(GuardReports, FramesWithoutDebugInformationNameOnlyTheSymbolThatContainsThem) {
  auto stripped = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "library", MATE_REPORT_NODEBUG_STRIPPED});
  EXPECT_EQ(stripped.exit_code, 128 + 11) << stripped.err;
  const auto frames = frames_after(stripped.err, "  accessed by thread");
  ASSERT_GE(frames.size(), 3u) << stripped.err;
  // The static writer: in no exported symbol, so only the module and offset.
  EXPECT_THAT(frames[0], ::testing::MatchesRegex("    #0 0x[0-9a-f]+ \\(.*libreport_nodebug_stripped\\.so\\+0x[0-9a-f]+\\)"))
      << stripped.err;
  EXPECT_THAT(stripped.err, Not(HasSubstr("nodebug_exported_before")));
  // The exported entry point: symbol+offset, then module+offset.
  EXPECT_THAT(frames[1], ::testing::MatchesRegex("    #1 0x[0-9a-f]+ in nodebug_entry\\+0x[0-9a-f]+ "
                                                 "\\(.*libreport_nodebug_stripped\\.so\\+0x[0-9a-f]+\\)"))
      << stripped.err;
  EXPECT_THAT(frames[2], HasSubstr(" in main at ")) << stripped.err;

  // With a .symtab, the static function is named from it (demangled).
  auto symtab = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "library", MATE_REPORT_NODEBUG_SYMTAB});
  EXPECT_EQ(symtab.exit_code, 128 + 11) << symtab.err;
  EXPECT_THAT(first_frame(symtab.err, "  accessed by thread"),
              ::testing::MatchesRegex("    #0 0x[0-9a-f]+ in nodebug_hidden_writer\\(char\\*, unsigned long\\)\\+0x[0-9a-f]+ "
                                      "\\(.*libreport_nodebug_symtab\\.so\\+0x[0-9a-f]+\\)"))
      << symtab.err;
}

// A SIGSEGV handler the program installs after start-up (as Python's faulthandler does) does not
// take the guard's place: the report comes first, then the program's handler runs.
TEST_F(GuardReports, AProgramsOwnHandlerRunsAfterTheReport) {
  auto exits = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "own_handler_exits"});
  EXPECT_EQ(exits.exit_code, 42) << exits.err;
  EXPECT_THAT(exits.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_THAT(exits.err, HasSubstr("write_one_past_the_end"));
  EXPECT_EQ(exits.out, "program handler ran\n");
  // A handler that returns: the process dies of the fault, as it would without the guard.
  auto returns = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "own_handler_returns"});
  EXPECT_EQ(returns.exit_code, 128 + 11) << returns.err;
  EXPECT_THAT(returns.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_EQ(returns.out, "program handler ran and returned\n");
}

// signal() and sigaction() answer with the program's own handlers, as without the guard.
TEST_F(GuardReports, SignalReturnsTheProgramsPreviousHandler) {
  auto plain = run({MATE_REPORT_CHILD, "signal_returns"});
  auto guarded = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "signal_returns"});
  EXPECT_EQ(guarded.out, plain.out);
  EXPECT_THAT(guarded.out, Not(HasSubstr(": no")));
  EXPECT_THAT(guarded.out, HasSubstr("second signal() returned the first handler: yes"));
  EXPECT_EQ(guarded.exit_code, 128 + 11) << guarded.err;
  EXPECT_THAT(guarded.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
}

// A fault outside every guarded range is the program's (a runtime faulting on purpose): its
// handler gets it untouched and the program goes on, with no report.
TEST_F(GuardReports, AFaultOutsideTheGuardGoesToTheProgramsHandlerWithoutAReport) {
  auto plain = run({MATE_REPORT_CHILD, "own_fault"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto guarded = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "own_fault"});
  EXPECT_EQ(guarded.exit_code, 0) << guarded.err;
  EXPECT_EQ(guarded.out, "program handler saw its own page\nresumed, the byte is 7\n");
  EXPECT_EQ(guarded.err, "");
}

// The program points fd 2 at a file (as pytest's capture does): the report still reaches the
// stderr it started with, and the program's file holds only its own line.
TEST_F(GuardReports, TheReportReachesTheStderrTheProgramStartedWith) {
  const mate::testing::TempDir dir("mate_report");
  const std::string file = (dir / "captured.txt").string();
  auto r = run({MATE_BINARY, "guard-run", "--", MATE_REPORT_CHILD, "redirected_stderr", file});
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_THAT(r.err, HasSubstr("write_one_past_the_end"));
  EXPECT_EQ(mate::testing::read_file(file), "the program's own line on its redirected stderr\n");
}

TEST_F(GuardReports, ReportFileGetsACopyNamedByProcess) {
  const mate::testing::TempDir dir("mate_report");
  mate::testing::RunOptions options;
  options.cwd = dir.path;  // a relative path is made absolute by guard-run
  auto r = run({MATE_BINARY, "guard-run", "--report-file", "reports/guard.%i.txt", "--", MATE_REPORT_CHILD,
                "pid_then_past"},
               options);
  // The directory must exist.
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--report-file"));
  EXPECT_THAT(r.err, HasSubstr("does not exist"));
  std::filesystem::create_directory(dir / "reports");
  r = run({MATE_BINARY, "guard-run", "--report-file", "reports/guard.%i.txt", "--", MATE_REPORT_CHILD,
           "pid_then_past"},
          options);
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  int pid = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "pid %d", &pid), 1) << r.out;
  const std::string copy = mate::testing::read_file(dir / "reports" / ("guard." + std::to_string(pid) + ".txt"));
  EXPECT_THAT(copy, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_THAT(copy, HasSubstr("write_one_past_the_end"));
  EXPECT_THAT(r.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));  // still on stderr
  EXPECT_EQ(std::filesystem::status(dir / "reports" / ("guard." + std::to_string(pid) + ".txt")).permissions() &
                std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

// ---- pytest, as the seed's users run it ----

constexpr const char* kSystemPython = "/usr/bin/python3";

// A test that writes one float64 past the end of a numpy array whose size (8 KiB) is a multiple
// of numpy's 16-byte alignment: in tail mode its end meets the guard page.
constexpr const char* kNumpyOverflowTest = R"(import ctypes
import numpy as np


def test_numpy_overflow():
    a = np.zeros(1024, dtype=np.float64)
    one = np.ones(1, dtype=np.float64)
    ctypes.memmove(a.ctypes.data + a.nbytes, one.ctypes.data, one.nbytes)
)";

class GuardReportsUnderPytest : public GuardReports {
 protected:
  void SetUp() override {
    GuardReports::SetUp();
    if (IsSkipped()) return;
    if (!std::filesystem::exists(kSystemPython)) GTEST_SKIP() << kSystemPython << " is not installed";
    auto probe = run({kSystemPython, "-c", "import numpy, pytest"});
    if (probe.exit_code != 0)
      GTEST_SKIP() << kSystemPython << " cannot import numpy and pytest (install python3-numpy and python3-pytest): "
                   << probe.err;
  }
};

void expect_report_and_test_id(const mate::testing::RunResult& r) {
  EXPECT_EQ(r.exit_code, 128 + 11) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to ")) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("0 bytes past the end of allocation #")) << r.err;
  EXPECT_THAT(r.err, HasSubstr(" of 8192 bytes at [")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("\n  accessed by thread ")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("\n  pytest test: test_overflow.py::test_numpy_overflow (call)\n")) << r.err;
}

// pytest with its default options: output captured (fd 2 redirected to a temporary file) and
// faulthandler enabled (its SIGSEGV handler installed after the guard's).
TEST_F(GuardReportsUnderPytest, PytestWithDefaultOptionsShowsTheReportAndTheTest) {
  const mate::testing::TempDir dir("mate_pytest");
  std::ofstream(dir / "test_overflow.py") << kNumpyOverflowTest;
  mate::testing::RunOptions options;
  options.cwd = dir.path;
  auto r = run({MATE_BINARY, "guard-run", "--", kSystemPython, "-m", "pytest", "test_overflow.py"}, options);
  expect_report_and_test_id(r);
  // Then pytest's faulthandler, the program's handler, prints the Python traceback.
  const auto traceback = r.err.find("Fatal Python error: Segmentation fault");
  ASSERT_NE(traceback, std::string::npos) << r.err;
  EXPECT_GT(traceback, r.err.find("mate guard: overflow"));
  EXPECT_THAT(r.err.substr(traceback), HasSubstr("in test_numpy_overflow")) << r.err;
}

TEST_F(GuardReportsUnderPytest, PytestWithoutFaulthandlerShowsTheReportAndTheTest) {
  const mate::testing::TempDir dir("mate_pytest");
  std::ofstream(dir / "test_overflow.py") << kNumpyOverflowTest;
  mate::testing::RunOptions options;
  options.cwd = dir.path;
  auto r = run({MATE_BINARY, "guard-run", "--", kSystemPython, "-m", "pytest", "-p", "no:faulthandler",
                "test_overflow.py"},
               options);
  expect_report_and_test_id(r);
}

// Python's faulthandler (enabled by python3 -X faulthandler, without pytest's capture) still
// prints its traceback after the report: the guard runs the program's handler.
TEST_F(GuardReportsUnderPytest, PythonsFaulthandlerStillPrintsItsTraceback) {
  const std::string script = std::string(kNumpyOverflowTest) + "\ntest_numpy_overflow()\n";
  auto r = run({MATE_BINARY, "guard-run", "--", kSystemPython, "-X", "faulthandler", "-c", script});
  EXPECT_EQ(r.exit_code, 128 + 11) << r.err;
  const auto report = r.err.find("mate guard: overflow: SIGSEGV on a write to ");
  const auto traceback = r.err.find("Fatal Python error: Segmentation fault");
  ASSERT_NE(report, std::string::npos) << r.err;
  ASSERT_NE(traceback, std::string::npos) << r.err;
  EXPECT_LT(report, traceback);
  EXPECT_THAT(r.err.substr(traceback), HasSubstr("in test_numpy_overflow")) << r.err;
}

}  // namespace
