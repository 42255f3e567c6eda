// FileLock between real processes: the waiter is told who holds the lock, and a holder killed
// with SIGKILL releases it through the kernel.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mate/core/file_lock.hpp"
#include "temp_dir.hpp"

namespace {

using mate::core::FileLock;
using mate::core::LockHolder;
using mate::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Forks a child that takes the lock, signals readiness through a pipe, then sleeps until killed.
pid_t spawn_holder(const std::string& path) {
  int ready[2];
  EXPECT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    auto lock = FileLock::acquire(path);
    char c = 'x';
    if (write(ready[1], &c, 1) != 1) _exit(3);
    for (;;) pause();
  }
  close(ready[1]);
  char c;
  EXPECT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  return pid;
}

TEST(FileLock, SecondAcquireInSameProcessWaitsForRelease) {
  TempDir dir("mate_lock_test");
  const std::string path = (dir / "a.lock").string();
  auto first = FileLock::try_acquire(path);
  ASSERT_TRUE(first.has_value());
  // flock locks belong to the open file description: a second open conflicts, even in-process.
  EXPECT_FALSE(FileLock::try_acquire(path).has_value());
  first->release();
  EXPECT_TRUE(FileLock::try_acquire(path).has_value());
}

TEST(FileLock, HolderWritesPidHostAndCommand) {
  TempDir dir("mate_lock_test");
  const std::string path = (dir / "b.lock").string();
  auto lock = FileLock::acquire(path);
  auto holder = FileLock::read_holder(path);
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, getpid());
  EXPECT_FALSE(holder->host.empty());
  EXPECT_THAT(holder->command, HasSubstr("test_core"));
  EXPECT_THAT(holder->describe(), HasSubstr("pid " + std::to_string(getpid()) + " on host "));
  EXPECT_THAT(holder->since, MatchesRegex(R"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)"));
  lock.release();
  EXPECT_FALSE(FileLock::read_holder(path).has_value()) << "release clears the holder text";
}

TEST(FileLock, WaiterIsToldWhoHoldsItAndGetsItWhenHolderIsKilled) {
  TempDir dir("mate_lock_test");
  const std::string path = (dir / "c.lock").string();
  pid_t holder_pid = spawn_holder(path);
  std::atomic<long> reported_pid{0};
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    FileLock::Options options;
    options.notify_after = std::chrono::milliseconds(50);
    options.on_wait = [&](const LockHolder& h, std::chrono::milliseconds waited) {
      EXPECT_GE(waited.count(), 50);
      reported_pid = h.pid;
    };
    auto lock = FileLock::acquire(path, options);
    acquired = true;
  });
  for (int i = 0; i < 200 && reported_pid == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(reported_pid.load(), holder_pid);
  EXPECT_FALSE(acquired.load());
  kill(holder_pid, SIGKILL);
  int status = 0;
  waitpid(holder_pid, &status, 0);
  waiter.join();
  EXPECT_TRUE(acquired.load());
}

TEST(FileLock, MissingDirectoryIsAnErrorNamingThePath) {
  try {
    FileLock::acquire("/nonexistent_mate_dir/x.lock");
    FAIL() << "expected an error";
  } catch (const std::system_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent_mate_dir/x.lock"));
  }
}

}  // namespace
