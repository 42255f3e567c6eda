// mate/core/log_sink.hpp — where log records go: stdout, stderr or a file, one write per record.
//
// Contract:
//  * A destination is "stdout", "stderr" or a file path; every "%i" in a path becomes the
//    process id. A file is opened for append (O_APPEND) and its directory is created if missing.
//    A path with "%i" names the current process: a forked child opens its own file on its first
//    write (a pthread_atfork handler bumps a counter; the fast path compares it, no syscall).
//  * write(record) hands the whole record to the kernel in one write(2) call. Appends to one file
//    from several threads or processes therefore never interleave inside a record. On a pipe a
//    partial write is completed by further calls.
//  * A record never tears in a file: the space is reserved at the end of the file ahead of the
//    records (fallocate, FALLOC_FL_KEEP_SIZE, in 64 KiB steps), and the process's file-size limit
//    (RLIMIT_FSIZE) is checked; when either says a record does not fit, nothing goes to the file.
//    Should a write still come back short (a file system without fallocate, another process
//    using the reserved space), the partial record is cut off again (ftruncate) when nothing was
//    appended after it.
//  * One system call per record, the write(2): the file's size and the limit are read again
//    only at each 64 KiB step (while no limit is set; under a limit, with every record). A limit
//    lowered between two steps to below the reserved end is the one gap: a record crossing it
//    raises SIGXFSZ (see append() in log_sink.cpp).
//  * The host program never fails because of logging: an unopenable destination, a full disk,
//    a record past RLIMIT_FSIZE (checked first: the write would raise SIGXFSZ and kill the
//    program) or any other write error prints one message on stderr naming the path and the
//    error, and the sink falls back to stderr, where the record is written whole. Nothing here
//    throws, and no signal disposition is changed.
//  * A closed reader (stdout or stderr into a pipe whose reader exited, a FIFO) is EPIPE, never
//    SIGPIPE (quiet_write.hpp: on pipes SIGPIPE is blocked around the write; regular files pay
//    nothing): logging stops, with one message on stderr unless stderr is what broke.
//  * A new log file is created 0600 (it holds argument values), missing parent directories 0700,
//    whatever the umask. A FIFO is opened non-blocking (then made blocking again): one with no
//    reader is an error (stderr fallback), not a program blocked in open() forever.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "mate/core/file_size_limit.hpp"
#include "mate/core/quiet_write.hpp"

namespace mate::core {

class LogSink {
 public:
  // Opens `destination` (see above). Never returns null; on failure the sink writes to stderr.
  static std::unique_ptr<LogSink> open(std::string_view destination);
  ~LogSink();
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  // Writes one record. Thread-safe; async-signal-safe once opened in this process (a forked
  // child's first write opens its own file for a "%i" path) unless a file-size limit is set
  // (then a lock keeps the limit's check and the write together).
  void write(std::string_view record) noexcept;

  // The resolved path ("stdout", "stderr" or the file path with %i replaced). In a forked child
  // it changes on the first write; read it from one thread.
  const std::string& path() const noexcept { return path_; }
  // True when the destination failed and records go to stderr instead.
  bool fell_back() const noexcept { return fallback_.load(std::memory_order_relaxed); }
  // The descriptor records go to; -1 once logging stopped (the reader of a pipe went away).
  int fd() const noexcept { return fd_.load(std::memory_order_relaxed); }
  bool stopped() const noexcept { return fd() < 0; }

  // pthread_atfork's child handler (registered by open()): bumps the fork generation and resets
  // every file sink's locks. Not for callers.
  static void after_fork_in_child() noexcept;

 private:
  LogSink() = default;
  void open_file();
  void reopen_after_fork() noexcept;
  void fall_back(int error) noexcept;
  void stop(int fd) noexcept;
  void write_failed(int fd, std::string_view record, int error) noexcept;
  int append(int fd, std::string_view record) noexcept;
  int append_checked(int fd, std::string_view record) noexcept;
  int append_under_limit(int fd, std::string_view record) noexcept;
  int write_whole(int fd, std::string_view record) noexcept;
  int write_rest(int fd, std::string_view record, ssize_t n) noexcept;
  int write_stream(int fd, std::string_view record, StreamKind kind, bool regular) noexcept;
  int reserve(int fd, std::uint64_t size, std::uint64_t bytes, std::uint64_t limit) noexcept;

  std::string pattern_;       // the file destination as given, "%i" unexpanded
  bool per_process_ = false;  // pattern_ contains "%i"
  std::string path_;
  std::atomic<int> fd_{2};
  std::atomic<StreamKind> kind_{StreamKind::Pipe};  // of fd_ as opened (stream_kind, once)
  std::atomic<bool> regular_{false};                 // fd_ is a regular file: the size limit applies
  int owned_ = -1;  // fd to close, -1 when stdout/stderr
  std::atomic<bool> fallback_{false};
  std::atomic<unsigned> opened_in_{0};  // the fork generation whose process opened owned_
  std::mutex reopen_mutex_;
  std::mutex limit_mutex_;  // taken by append() only under a file-size limit
  std::atomic<bool> reserve_unsupported_{false};
  // The checks that keep write(2) alone on a record's path (see append()): RLIMIT_FSIZE as last
  // read; where this process believes the file ends (a stream: the bytes it wrote); and up to
  // where the space is reserved and neither the size nor the limit needs reading again.
  std::atomic<std::uint64_t> limit_{kNoFileSizeLimit};
  std::atomic<std::uint64_t> written_end_{0};
  std::atomic<std::uint64_t> checked_end_{0};
};

// Replaces every "%i" in `pattern` with `pid`.
std::string expand_pid(std::string_view pattern, long pid);

}  // namespace mate::core
