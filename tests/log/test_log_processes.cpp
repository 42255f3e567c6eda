// Log tests that need whole processes: a crash inside a call, many writers on one file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace {

mate::testing::RunOptions with_env(std::map<std::string, std::string> env) {
  mate::testing::RunOptions o;
  o.env = std::move(env);
  return o;
}

// with_env(env) for a child that crashes on purpose: under the sanitizer presets the fault must
// reach the child's own handler (or kill it), not the sanitizer's.
mate::testing::RunOptions crashing_child_env(std::map<std::string, std::string> env) {
  env["ASAN_OPTIONS"] = "handle_segv=0:allow_user_segv_handler=1:detect_leaks=0";
  env["TSAN_OPTIONS"] = "handle_segv=0:allow_user_segv_handler=1";
  return with_env(std::move(env));
}

// A path in this test program's own temporary directory (removed when the program exits).
std::filesystem::path scratch(const std::string& name) {
  static const mate::testing::TempDir dir("mate_log_proc");
  return dir / name;
}

TEST(LogProcesses, CrashInsideACallLeavesItsInputsInTheLogFile) {
  std::string log = scratch("crash/%i.log").string();
  auto r = mate::testing::run({MATE_LOG_CHILD, "crash"},
                              crashing_child_env({{"MATE_LOGLEVEL", "3"}, {"MATE_LOGDEST", log}}));
  EXPECT_EQ(r.term_signal, SIGSEGV) << r.err;
  // The file is named after the child's pid (%i): find it.
  std::string text;
  for (const auto& e : std::filesystem::directory_iterator(scratch("crash"))) text += mate::testing::read_file(e.path());
  EXPECT_NE(text.find("] CrashingOp.run inputs\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  input: tensor f32 [8, 8] strides [8, 1] cpu contiguous va ["), std::string::npos) << text;
  EXPECT_NE(text.find("  block_size: i32 128\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  tag: str \"before-the-fault\"\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("outputs"), std::string::npos) << "the call never returned";
}

// The issue's `MATE_LOGLEVEL=3 MATE_LOGDEST=stderr prog 2>&1 >/dev/null | head -1`: head exits
// after one line while the program still logs (records of several KB, far more than a pipe
// holds). The program exits 0, as it does without logging, never 141 (SIGPIPE).
TEST(LogProcesses, AReaderThatExitsEarlyDoesNotKillTheProgram) {
  for (const std::string dest : {"stderr", "stdout"}) {
    const std::string redirect = dest == "stderr" ? "2>&1 >/dev/null" : "2>/dev/null";
    auto r = mate::testing::run({"/bin/bash", "-c",
                                 "set -o pipefail; MATE_LOGLEVEL=3 MATE_LOGDEST=" + dest + " " MATE_LOG_CHILD
                                 " stress 2 100 " + redirect + " | head -1 >/dev/null; echo \"status $?\""});
    EXPECT_EQ(r.out, "status 0\n") << dest << ": " << r.err;
  }
}

TEST(LogProcesses, CrashReportContextNamesTheCallInFlight) {
  auto r = mate::testing::run({MATE_LOG_CHILD, "crash-context"},
                              crashing_child_env({{"MATE_LOGLEVEL", "1"}, {"MATE_LOGDEST", "stdout"}}));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.out.find("] CrashingOp.run\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("mate API call in flight on this thread: CrashingOp.run #1\n"), std::string::npos) << r.err;
}

TEST(LogProcesses, RecordsFromThreadsAndProcessesSharingAFileStayWhole) {
  constexpr int kProcesses = 4, kThreads = 4, kCalls = 50;
  for (const char* format : {"json", "text"}) {
    std::string log = scratch(std::string("shared.") + format).string();
    std::vector<std::thread> launchers;
    std::vector<mate::testing::RunResult> results(kProcesses);
    for (int p = 0; p < kProcesses; ++p) {
      launchers.emplace_back([&, p] {
        results[p] = mate::testing::run(
            {MATE_LOG_CHILD, "stress", std::to_string(kThreads), std::to_string(kCalls)},
            with_env({{"MATE_LOGLEVEL", "3"}, {"MATE_LOGDEST", log}, {"MATE_LOGFORMAT", format}}));
      });
    }
    for (auto& l : launchers) l.join();
    for (const auto& r : results) ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string text = mate::testing::read_file(log);
    std::map<std::string, int> events;
    if (std::string(format) == "json") {
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << "a torn record: " << line.substr(0, 200);
        ASSERT_EQ(j["args"].size(), j["event"] == "inputs" ? 3u : 1u);
        ASSERT_EQ(j["args"][0]["items"].size(), j["event"] == "inputs" ? 40u : 0u);
        events[j["event"]]++;
      }
    } else {
      // A whole inputs record is its header, 4 lines of arguments and 40 tensor lines, in order.
      std::istringstream lines(text);
      std::string line;
      while (std::getline(lines, line)) {
        ASSERT_EQ(line.rfind("[", 0), 0u) << "expected a record header: " << line;
        if (line.find("] Stress.call outputs (") != std::string::npos) {
          ASSERT_TRUE(std::getline(lines, line));
          ASSERT_EQ(line.rfind("  return: f32 ", 0), 0u) << line;
          events["outputs"]++;
          continue;
        }
        ASSERT_NE(line.find("] Stress.call inputs"), std::string::npos) << line;
        ASSERT_TRUE(std::getline(lines, line));
        ASSERT_EQ(line, "  tensors: list of 40");
        for (int i = 0; i < 40; ++i) {
          ASSERT_TRUE(std::getline(lines, line));
          ASSERT_EQ(line.rfind("    [" + std::to_string(i) + "]: tensor f32 [8, 8]", 0), 0u) << line;
        }
        ASSERT_TRUE(std::getline(lines, line));
        ASSERT_EQ(line.rfind("  id: i64 ", 0), 0u) << line;
        ASSERT_TRUE(std::getline(lines, line));
        ASSERT_EQ(line.rfind("  label: str \"xxxx", 0), 0u) << line;
        events["inputs"]++;
      }
    }
    EXPECT_EQ(events["inputs"], kProcesses * kThreads * kCalls) << format;
    EXPECT_EQ(events["outputs"], kProcesses * kThreads * kCalls) << format;
  }
}

}  // namespace

namespace {

// MATE_LOGDEST with %i names the current process: a forked child logs into a file of its own
// pid, not into its parent's.
TEST(LogProcesses, AForkedChildLogsToItsOwnPercentIFile) {
  const std::filesystem::path dir = scratch("fork");
  auto r = mate::testing::run({MATE_LOG_CHILD, "fork"},
                              with_env({{"MATE_LOGLEVEL", "1"}, {"MATE_LOGDEST", (dir / "%i.log").string()}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int parent = 0, child = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "child %d\nparent %d", &child, &parent), 2) << r.out;
  auto records = [&](int pid) {
    const std::string text = mate::testing::read_file(dir / (std::to_string(pid) + ".log"));
    std::size_t n = 0, own = 0;
    for (std::size_t at = text.find("] Stress.call\n"); at != std::string::npos; at = text.find("] Stress.call\n", at + 1)) ++n;
    const std::string tag = " pid " + std::to_string(pid) + " ";
    for (std::size_t at = text.find(tag); at != std::string::npos; at = text.find(tag, at + 1)) ++own;
    EXPECT_EQ(own, n) << "records of another process in " << pid << ".log:\n" << text;
    // Each process logged from its main thread (the child: the thread that forked), whose tid
    // is its pid: a cached id of the parent's must not survive the fork.
    const std::string thread = " tid " + std::to_string(pid) + " ";
    std::size_t main_thread = 0;
    for (std::size_t at = text.find(thread); at != std::string::npos; at = text.find(thread, at + 1)) ++main_thread;
    EXPECT_EQ(main_thread, n) << pid << ".log:\n" << text;
    return n;
  };
  EXPECT_EQ(records(parent), 2u) << "the parent's calls before and after the fork";
  EXPECT_EQ(records(child), 2u) << "the child's calls";
}

TEST(LogProcesses, UnwritableDestinationFallsBackToStderrAndTheProgramRuns) {
  std::string blocker = scratch("not_a_dir").string();
  std::ofstream(blocker) << "x";
  std::string dest = blocker + "/logs/%i.log";
  auto r = mate::testing::run({MATE_LOG_CHILD, "stress", "2", "3"},
                              with_env({{"MATE_LOGLEVEL", "1"}, {"MATE_LOGDEST", dest}}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string message = "mate: cannot write the API log to '" + blocker + "/logs/";
  std::size_t first = r.err.find(message);
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("': Not a directory; logging to stderr instead\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(message, first + 1), std::string::npos) << "one message only:\n" << r.err;
  std::size_t calls = 0;
  for (std::size_t at = r.err.find("] Stress.call\n"); at != std::string::npos; at = r.err.find("] Stress.call\n", at + 1)) ++calls;
  EXPECT_EQ(calls, 6u) << r.err;
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
