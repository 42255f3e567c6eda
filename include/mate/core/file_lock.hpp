// mate/core/file_lock.hpp — an exclusive lock between processes, held on a file with flock(2).
//
// Contract:
//  * The kernel releases the lock when the holder's descriptor closes, including when the holder
//    dies (SIGKILL, crash): a dead process never leaves a stale lock behind. The lock file itself
//    stays (deleting it would let two processes lock two different files of the same name).
//  * The descriptor is close-on-exec, so children the holder starts (a compiler, ninja) neither
//    keep the lock alive after the holder dies nor release it early.
//  * The holder writes who it is (pid, host, command line, since) into the lock file; a waiter
//    reads it to say whom it is waiting on. The text is advisory, the flock is the lock.
//  * flock on NFS is emulated with fcntl locks by Linux; local file systems are the target.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace mate::core {

// Who holds a lock, as the holder wrote it into the lock file.
struct LockHolder {
  long pid = 0;
  std::string host;
  std::string command;  // the holder's command line, arguments separated by spaces
  std::string since;    // UTC time the lock was taken, ISO 8601
  // "pid 123 on host h (cmd ...), since 2026-01-01T00:00:00Z"; "an unknown process" when empty.
  std::string describe() const;
};

class FileLock {
 public:
  struct Options {
    // After waiting this long, `on_wait` is called once with the holder's description.
    std::chrono::milliseconds notify_after{3000};
    std::function<void(const LockHolder& holder, std::chrono::milliseconds waited)> on_wait;
  };

  // Blocks until this process holds the lock on `path` (created with mode 0644 if missing; its
  // directory must exist). Throws std::system_error naming the path on failure.
  static FileLock acquire(const std::string& path, const Options& options);
  static FileLock acquire(const std::string& path) { return acquire(path, Options{}); }
  // Takes the lock if it is free; nullopt when another process holds it.
  static std::optional<FileLock> try_acquire(const std::string& path);

  // What the current holder wrote, or nullopt when the file is missing or empty.
  static std::optional<LockHolder> read_holder(const std::string& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  const std::string& path() const noexcept { return path_; }
  // Releases early (the destructor does it otherwise).
  void release() noexcept;

 private:
  FileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

}  // namespace mate::core
