#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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

TEST(LogSink, ExpandPidReplacesEveryOccurrence) {
  EXPECT_EQ(mate::core::expand_pid("a%i/b%i%", 42), "a42/b42%");
  EXPECT_EQ(mate::core::expand_pid("plain", 42), "plain");
}

}  // namespace
