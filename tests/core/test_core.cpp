#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mate/core/atomic_file.hpp"
#include "mate/core/crash_context.hpp"
#include "temp_dir.hpp"

namespace {

using mate::testing::read_file;
using mate::testing::TempDir;

TEST(AtomicFile, ReplacesContentAndLeavesNoTemporaryFiles) {
  TempDir dir("mate_atomic");
  std::string path = (dir / "meta.json").string();
  ASSERT_FALSE(mate::core::write_file_atomically(path, "first", 0600));
  ASSERT_FALSE(mate::core::write_file_atomically(path, "second", 0600));
  EXPECT_EQ(read_file(path), "second");
  struct stat st{};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path), {}), 1);
}

TEST(AtomicFile, FailureLeavesTheOldFileAndSaysWhichStep) {
  std::string step;
  auto ec = mate::core::write_file_atomically("/nonexistent-dir/x", "data", 0644, &step);
  EXPECT_TRUE(ec);
  EXPECT_EQ(step, "create temporary file");
}

// Content past RLIMIT_FSIZE fails at "write" with EFBIG and leaves the old file; SIGXFSZ (left at
// its default action, which kills) is never raised.
TEST(AtomicFile, AFileSizeLimitFailsTheWriteInsteadOfKillingTheProcess) {
  TempDir dir("mate_atomic_fsize");
  const std::string path = (dir / "call.json").string();
  ASSERT_FALSE(mate::core::write_file_atomically(path, "old", 0600));
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit lim{100, RLIM_INFINITY};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) std::_Exit(91);
    std::string step;
    std::error_code ec = mate::core::write_file_atomically(path, std::string(1000, 'x'), 0600, &step);
    std::_Exit(ec == std::errc::file_too_large && step == "write" ? 0 : 3);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: not EFBIG at the write step";
  EXPECT_EQ(read_file(path), "old");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path), {}), 1) << "a temporary is left";
}

std::size_t provider_a(char* buf, std::size_t cap) noexcept {
  const char text[] = "context A\n";
  std::size_t n = std::min(cap, sizeof text - 1);
  std::memcpy(buf, text, n);
  return n;
}

TEST(CrashContext, ProvidersAreCalledAndWrittenToTheFd) {
  EXPECT_TRUE(mate::core::register_crash_context(provider_a));
  EXPECT_TRUE(mate::core::register_crash_context(provider_a));  // duplicate ignored
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  mate::core::write_crash_context(fds[1]);
  close(fds[1]);
  char buf[256] = {};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "context A\n");
}

}  // namespace
