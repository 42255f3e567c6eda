// mate/core/log_sink.hpp — where log records go: stdout, stderr or a file, one write per record.
//
// Contract:
//  * A destination is "stdout", "stderr" or a file path; every "%i" in a path becomes the
//    process id. A file is opened for append (O_APPEND) and its directory is created if missing.
//  * write(record) hands the whole record to the kernel in one write(2) call (a partial write is
//    completed by further calls, which only happens on pipes and full disks). Appends to one file
//    from several threads or processes therefore never interleave inside a record.
//  * The host program never fails because of logging: an unopenable destination, or a write that
//    fails later, prints one message on stderr naming the path and the error, and the sink falls
//    back to stderr. Nothing here throws.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

namespace mate::core {

class LogSink {
 public:
  // Opens `destination` (see above). Never returns null; on failure the sink writes to stderr.
  static std::unique_ptr<LogSink> open(std::string_view destination);
  ~LogSink();
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  // Writes one record. Thread-safe, async-signal-safe once opened (write(2) only).
  void write(std::string_view record) noexcept;

  // The resolved path ("stdout", "stderr" or the file path with %i replaced).
  const std::string& path() const noexcept { return path_; }
  // True when the destination failed and records go to stderr instead.
  bool fell_back() const noexcept { return fallback_.load(std::memory_order_relaxed); }
  int fd() const noexcept { return fd_.load(std::memory_order_relaxed); }

 private:
  LogSink() = default;
  void fall_back(int error) noexcept;

  std::string path_;
  std::atomic<int> fd_{2};
  int owned_ = -1;  // fd to close, -1 when stdout/stderr
  std::atomic<bool> fallback_{false};
};

// Replaces every "%i" in `pattern` with `pid`.
std::string expand_pid(std::string_view pattern, long pid);

}  // namespace mate::core
