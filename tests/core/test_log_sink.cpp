#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "mate/core/log_sink.hpp"
#include "temp_dir.hpp"

namespace {

using mate::testing::read_file;
using mate::testing::TempDir;

TEST(LogSink, ExpandsPidCreatesDirectoryAndAppends) {
  TempDir dir("mate_sink");
  std::string pattern = (dir / "sub" / "log_%i.txt").string();
  {
    auto sink = mate::core::LogSink::open(pattern);
    EXPECT_FALSE(sink->fell_back());
    EXPECT_EQ(sink->path(), (dir / "sub" / ("log_" + std::to_string(getpid()) + ".txt")).string());
    sink->write("one\n");
  }
  {
    auto sink = mate::core::LogSink::open(pattern);
    sink->write("two\n");
  }
  EXPECT_EQ(read_file((dir / "sub" / ("log_" + std::to_string(getpid()) + ".txt")).string()), "one\ntwo\n");
}

TEST(LogSink, StandardStreams) {
  EXPECT_EQ(mate::core::LogSink::open("stdout")->fd(), 1);
  EXPECT_EQ(mate::core::LogSink::open("stderr")->fd(), 2);
  EXPECT_EQ(mate::core::LogSink::open("")->fd(), 1);
}

TEST(LogSink, UnwritableDestinationFallsBackToStderrWithOneMessage) {
  // A regular file used as a directory: fails even for root.
  TempDir dir("mate_blocker");
  std::string blocker = (dir / "file").string();
  std::ofstream(blocker) << "x";
  std::string bad = blocker + "/x/log.txt";
  testing::internal::CaptureStderr();
  auto sink = mate::core::LogSink::open(bad);
  sink->write("record\n");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(sink->fell_back());
  EXPECT_EQ(sink->fd(), 2);
  EXPECT_NE(err.find("cannot write the API log to '" + bad + "': Not a directory"), std::string::npos) << err;
  EXPECT_NE(err.find("logging to stderr instead"), std::string::npos) << err;
  EXPECT_NE(err.find("record\n"), std::string::npos);
  EXPECT_EQ(err.find("cannot write", err.find("cannot write") + 1), std::string::npos) << "one message only";
}

// Record `i` of the tests below: `size` bytes, newline-terminated, unlike any other record.
std::string record(int i, std::size_t size) {
  std::string r = "record " + std::to_string(i) + " ";
  r.resize(size - 1, static_cast<char>('a' + i % 26));
  return r + "\n";
}

// Runs `body` in a forked child whose stderr goes to `err`; returns its wait status.
template <class Body>
int in_child(const std::string& err, Body body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (std::freopen(err.c_str(), "w", stderr) == nullptr) std::_Exit(90);
    std::_Exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// ulimit -f: a record that would cross RLIMIT_FSIZE is not written (the write would raise
// SIGXFSZ and kill the program, whose disposition the sink leaves alone): it goes to stderr.
TEST(LogSink, ARecordPastTheFileSizeLimitGoesToStderrAndTheProgramLives) {
  TempDir dir("mate_sink_fsize");
  const std::string log = (dir / "limit.log").string(), err = (dir / "err.txt").string();
  const int status = in_child(err, [&] {
    rlimit lim{4096, RLIM_INFINITY};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 91;
    auto sink = mate::core::LogSink::open(log);
    for (int i = 0; i < 6; ++i) sink->write(record(i, 1000));
    return sink->fell_back() ? 0 : 92;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::string kept;
  for (int i = 0; i < 4; ++i) kept += record(i, 1000);
  EXPECT_EQ(read_file(log), kept) << "the first 4 records fit in 4096 bytes, whole";
  const std::string text = read_file(err);
  EXPECT_NE(text.find("cannot write the API log to '" + log + "': File too large; logging to stderr instead"),
            std::string::npos) << text;
  EXPECT_NE(text.find(record(4, 1000) + record(5, 1000)), std::string::npos) << "the rest, whole, on stderr";
}

// A full disk (a 64 KiB tmpfs in a private mount namespace): the file holds whole records only,
// the record that did not fit goes to stderr.
TEST(LogSink, AFullDiskNeverLeavesATornRecordInTheFile) {
  TempDir dir("mate_sink_full");
  const std::string mnt = (dir / "mnt").string(), copy = (dir / "copy.log").string();
  const std::string err = (dir / "err.txt").string();
  std::filesystem::create_directories(mnt);
  constexpr std::size_t kRecord = 3000;
  const int status = in_child(err, [&] {
    if (::unshare(CLONE_NEWNS) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return 77;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0) return 77;
    auto sink = mate::core::LogSink::open(mnt + "/full.log");
    int i = 0;
    while (!sink->fell_back() && i < 100) sink->write(record(i++, kRecord));
    std::ofstream(copy) << read_file(mnt + "/full.log");  // the mount goes away with this process
    return sink->fell_back() ? 0 : 92;
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot mount a tmpfs here";
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the disk never filled up";
  const std::string text = read_file(copy);
  ASSERT_GT(text.size(), 0u);
  EXPECT_EQ(text.size() % kRecord, 0u) << "a torn record: " << text.size() << " bytes";
  const int whole = static_cast<int>(text.size() / kRecord);
  std::string expected;
  for (int i = 0; i < whole; ++i) expected += record(i, kRecord);
  EXPECT_TRUE(text == expected) << "the file is not the first " << whole << " records";
  const std::string errors = read_file(err);
  EXPECT_NE(errors.find("No space left on device; logging to stderr instead"), std::string::npos) << errors;
  EXPECT_NE(errors.find(record(whole, kRecord)), std::string::npos) << "the record that did not fit, whole";
}

// %i is the current process: a forked child writes to a file named by its own pid, not into its
// parent's, and the parent keeps its file.
TEST(LogSink, AForkedChildWritesItsOwnPercentIFile) {
  TempDir dir("mate_sink_fork");
  const std::string pattern = (dir / "%i.log").string(), err = (dir / "err.txt").string();
  auto sink = mate::core::LogSink::open(pattern);
  sink->write("parent before\n");
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    sink->write("child\n");
    sink->write("child again\n");
    std::_Exit(sink->path() == mate::core::expand_pid(pattern, ::getpid()) ? 0 : 3);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's sink still names the parent's file";
  sink->write("parent after\n");
  EXPECT_EQ(read_file(mate::core::expand_pid(pattern, ::getpid())), "parent before\nparent after\n");
  EXPECT_EQ(read_file(mate::core::expand_pid(pattern, child)), "child\nchild again\n");
  EXPECT_FALSE(sink->fell_back());
}

TEST(LogSink, ExpandPidReplacesEveryOccurrence) {
  EXPECT_EQ(mate::core::expand_pid("a%i/b%i%", 42), "a42/b42%");
  EXPECT_EQ(mate::core::expand_pid("plain", 42), "plain");
}

}  // namespace
