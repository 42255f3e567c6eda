// The log sink: one write(2) per record on an O_APPEND descriptor, stderr as the fallback.
// Files get their space reserved before a record is written, so that a record is in the file
// whole or not at all (see the contract in log_sink.hpp).
#include "mate/core/log_sink.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>

#include "mate/core/quiet_write.hpp"

namespace mate::core {

std::string expand_pid(std::string_view pattern, long pid) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'i') {
      out += std::to_string(pid);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

namespace {

// How far ahead a check reaches. A file's space is reserved this far past its end (what is not
// used stays allocated beyond the end of the file: KEEP_SIZE leaves the size alone), and the size
// and the file-size limit are read again only when a record would end past it: one write(2) per
// record otherwise.
constexpr std::uint64_t kCheckAhead = 64 * 1024;

// fall_back()'s reason for a FIFO that had no reader when it was opened (open gave ENXIO).
constexpr int kNoReader = -1;

// Bumped in every forked child: a sink opened under another generation belongs to the parent.
std::atomic<unsigned> g_fork_generation{0};

// The file sinks of the process, for the fork handler (a handful at most; one more is simply not
// watched: its locks are then not reset in a child).
constexpr int kWatchedSinks = 16;
std::atomic<LogSink*> g_sinks[kWatchedSinks];

void watch_forks() {
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, [] { LogSink::after_fork_in_child(); });
    return true;
  }();
  (void)registered;
}

bool is_regular(int fd) noexcept {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

// EFBIG when writing `size` bytes to the regular file `fd` would cross `limit` (the kernel would
// raise SIGXFSZ); 0 otherwise. Costs an fstat (and an fcntl): only under a finite limit.
int check_limit(int fd, std::size_t size, std::uint64_t limit) noexcept {
  if (limit == kNoFileSizeLimit) return 0;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  const int flags = ::fcntl(fd, F_GETFL);
  const off_t pos = flags >= 0 && (flags & O_APPEND) ? st.st_size : ::lseek(fd, 0, SEEK_CUR);
  return pos >= 0 && static_cast<std::uint64_t>(pos) + size > limit ? EFBIG : 0;
}

void say(const std::string& message) noexcept { write_stderr(message); }

}  // namespace

std::unique_ptr<LogSink> LogSink::open(std::string_view destination) {
  std::unique_ptr<LogSink> sink(new LogSink());
  if (destination.empty() || destination == "stdout") {
    sink->path_ = "stdout";
    sink->fd_ = 1;
    sink->regular_.store(is_regular(1), std::memory_order_relaxed);
    sink->kind_.store(stream_kind(1), std::memory_order_relaxed);
    return sink;
  }
  if (destination == "stderr") {
    sink->path_ = "stderr";
    sink->fd_ = 2;
    sink->regular_.store(is_regular(2), std::memory_order_relaxed);
    sink->kind_.store(stream_kind(2), std::memory_order_relaxed);
    return sink;
  }
  sink->pattern_ = destination;
  sink->per_process_ = destination.find("%i") != std::string_view::npos;
  watch_forks();
  for (auto& slot : g_sinks) {
    LogSink* none = nullptr;
    if (slot.compare_exchange_strong(none, sink.get())) break;
  }
  const unsigned generation = g_fork_generation.load(std::memory_order_relaxed);
  sink->open_file();
  sink->opened_in_.store(generation, std::memory_order_release);
  return sink;
}

// In the child, right after fork (one thread): a lock some other thread of the parent held is
// held forever here; every file sink's locks start over unlocked.
void LogSink::after_fork_in_child() noexcept {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
  for (auto& slot : g_sinks) {
    if (LogSink* sink = slot.load(std::memory_order_relaxed)) {
      new (&sink->reopen_mutex_) std::mutex();
      new (&sink->limit_mutex_) std::mutex();
    }
  }
}

// Opens pattern_ for this process; on failure falls back to stderr. The caller publishes
// opened_in_ afterwards: until then other threads of a forked child wait in reopen_after_fork.
void LogSink::open_file() {
  path_ = expand_pid(pattern_, static_cast<long>(::getpid()));
  std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) create_directories(parent.string(), 0700);  // open() below reports what matters
  // 0600: the log holds argument values (an existing file keeps its mode). O_NONBLOCK: a FIFO
  // with no reader fails at once (ENXIO) instead of blocking the program in open() forever.
  int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) {
    fall_back(errno == ENXIO ? kNoReader : errno);
    return;
  }
  // Records are written whole, blocking as a pipe needs: non-blocking was for the open only.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  kind_.store(stream_kind(fd), std::memory_order_relaxed);
  regular_.store(is_regular(fd), std::memory_order_relaxed);
  owned_ = fd;
  fd_.store(fd, std::memory_order_relaxed);
}

// In a forked child, the first write of a "%i" sink: the parent's file is the parent's. The
// child closes its copy of the descriptor and opens the file named by its own pid.
void LogSink::reopen_after_fork() noexcept {
  std::lock_guard lock(reopen_mutex_);
  if (opened_in_.load(std::memory_order_acquire) == g_fork_generation.load(std::memory_order_relaxed)) return;
  if (owned_ >= 0) ::close(owned_);
  owned_ = -1;
  fd_.store(2, std::memory_order_relaxed);
  fallback_.store(false, std::memory_order_relaxed);  // the child's own file gets its own message
  checked_end_.store(0, std::memory_order_relaxed);
  written_end_.store(0, std::memory_order_relaxed);
  limit_.store(kNoFileSizeLimit, std::memory_order_relaxed);
  const unsigned generation = g_fork_generation.load(std::memory_order_relaxed);
  try {
    open_file();
  } catch (...) {
    fall_back(ENOMEM);
  }
  opened_in_.store(generation, std::memory_order_release);  // last: other threads now use fd_
}

LogSink::~LogSink() {
  for (auto& slot : g_sinks) {
    LogSink* self = this;
    if (slot.compare_exchange_strong(self, nullptr)) break;
  }
  if (owned_ >= 0) ::close(owned_);
}

void LogSink::fall_back(int error) noexcept {
  bool expected = false;
  if (!fallback_.compare_exchange_strong(expected, true)) return;  // one message per sink
  // stderr's own checks start over (a regular file has the file-size limit).
  regular_.store(is_regular(2), std::memory_order_relaxed);
  checked_end_.store(0, std::memory_order_relaxed);
  written_end_.store(0, std::memory_order_relaxed);
  fd_.store(2, std::memory_order_relaxed);
  try {
    const std::string why = error == kNoReader ? "a FIFO with no reader (No such device or address)" : std::strerror(error);
    say("mate: cannot write the API log to '" + path_ + "': " + why + "; logging to stderr instead\n");
  } catch (...) {
  }
}

// The reader of a pipe or FIFO went away (EPIPE on `fd`): logging stops. One message on stderr,
// unless stderr is what broke.
void LogSink::stop(int fd) noexcept {
  if (fd_.exchange(-1, std::memory_order_relaxed) < 0) return;  // one message per sink
  if (fd == 2) return;
  try {
    say("mate: the reader of the API log '" + path_ + "' went away (Broken pipe); API logging stops\n");
  } catch (...) {
  }
}

// Makes sure the file's blocks up to `size + bytes` are allocated, so the write cannot run out
// of space halfway, reserving ahead, and sets the next check there. Returns 0, or the errno that
// means the record does not fit.
int LogSink::reserve(int fd, std::uint64_t size, std::uint64_t bytes, std::uint64_t limit) noexcept {
  const std::uint64_t end = size + bytes;
  // Ahead, but never past RLIMIT_FSIZE: tmpfs checks the limit (and raises SIGXFSZ) even for
  // space reserved beyond the end of the file.
  const std::uint64_t ahead = std::min(std::max(end, size + kCheckAhead), limit);
  if (reserve_unsupported_.load(std::memory_order_relaxed)) {
    checked_end_.store(ahead, std::memory_order_relaxed);
    return 0;
  }
  for (std::uint64_t want : {ahead, end}) {
    int r;
    do {
      r = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(size), static_cast<off_t>(want - size));
    } while (r != 0 && errno == EINTR);
    if (r == 0) {
      checked_end_.store(want, std::memory_order_relaxed);
      return 0;
    }
    if (errno != ENOSPC && errno != EDQUOT && errno != EFBIG) {
      // No fallocate here (some FUSE and network file systems): write unreserved; write_whole()
      // takes a partial record back.
      reserve_unsupported_.store(true, std::memory_order_relaxed);
      checked_end_.store(ahead, std::memory_order_relaxed);
      return 0;
    }
    if (want == end) return errno;
  }
  return 0;
}

// One record onto the sink's own O_APPEND regular file: whole, or nothing. Returns 0 or the errno.
//
// Without a file-size limit (the common case) a record that ends inside the space the last check
// reserved costs its write(2) alone. The end is this process's estimate (the size at the last
// check plus its own records since): other processes appending to the same file make the true
// end larger, so their share of the reserved space is used up sooner; a record written past the
// reservation is still whole or taken back on a full disk (write_whole). The limit is read again
// at every check (each kCheckAhead bytes of log): a program that lowers its RLIMIT_FSIZE (or
// another process doing it with prlimit) below the end of the reserved space before the next
// check gets SIGXFSZ from a record crossing the new limit, as from its own writes. Once a limit
// is in force every record is checked (append_under_limit).
//
// The common case is inline in write(): the rest (checks, a limit) in functions of their own, so
// that a record's path pays for no frame of theirs (a `struct stat`, saved registers).
inline int LogSink::append(int fd, std::string_view record) noexcept {
  const std::uint64_t bytes = record.size();
  if (limit_.load(std::memory_order_relaxed) == kNoFileSizeLimit) [[likely]] {
    const std::uint64_t end = written_end_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (end <= checked_end_.load(std::memory_order_relaxed)) [[likely]] return write_whole(fd, record);
    return append_checked(fd, record);
  }
  return append_under_limit(fd, record);
}

// A record past the checked space (append()'s estimate of the end already counts it): the true
// size (other processes append too) and the limit again.
[[gnu::cold]] int LogSink::append_checked(int fd, std::string_view record) noexcept {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno;
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size), bytes = record.size();
  const std::uint64_t limit = file_size_limit();
  limit_.store(limit, std::memory_order_relaxed);
  written_end_.store(size + bytes, std::memory_order_relaxed);
  if (limit != kNoFileSizeLimit) return append_under_limit(fd, record);
  if (int error = reserve(fd, size, bytes, limit); error != 0) return error;
  return write_whole(fd, record);
}

// Under a file-size limit every record is checked against the file's true size, and the check
// and the write go together: another thread's record landing between them could put the end at
// the limit, and a write starting there raises SIGXFSZ. Processes sharing the file near the limit
// can still race; nothing short of changing the signal's disposition closes that. The limit is
// read with each record, so a raised limit brings back the unchecked path.
int LogSink::append_under_limit(int fd, std::string_view record) noexcept {
  std::lock_guard lock(limit_mutex_);
  const std::uint64_t limit = file_size_limit();
  limit_.store(limit, std::memory_order_relaxed);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno;
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size), bytes = record.size();
  written_end_.store(size + bytes, std::memory_order_relaxed);
  if (size + bytes > limit) return EFBIG;
  if (size + bytes > checked_end_.load(std::memory_order_relaxed))
    if (int error = reserve(fd, size, bytes, limit); error != 0) return error;
  return write_whole(fd, record);
}

// The write(2) of one record to the sink's file; anything but the whole record written goes on
// in write_rest.
inline int LogSink::write_whole(int fd, std::string_view record) noexcept {
  const ssize_t n = ::write(fd, record.data(), record.size());
  if (n == static_cast<ssize_t>(record.size())) [[likely]] return 0;
  return write_rest(fd, record, n);
}

// After a write(2) of `record` that returned `n`, not its size: again when interrupted before
// writing anything. A short write (out of space after all: unreserved, or another process took
// the reserved blocks; or stopped at the file-size limit, another process's append having moved
// ours past the check) would tear the record: the part written is taken back when it is still
// the file's end. (Another process appending between the write and the ftruncate would lose its
// record; that needs a full disk and a write landing within those few microseconds.)
[[gnu::cold]] int LogSink::write_rest(int fd, std::string_view record, ssize_t n) noexcept {
  while (n < 0 && errno == EINTR) n = ::write(fd, record.data(), record.size());
  if (n == static_cast<ssize_t>(record.size())) return 0;
  checked_end_.store(0, std::memory_order_relaxed);  // the next record checks size and space again
  if (n <= 0) return n < 0 ? errno : ENOSPC;
  // O_APPEND: the file offset is where this write's part ended.
  const off_t after = ::lseek(fd, 0, SEEK_CUR);
  struct stat st {};
  const bool at_end = after >= n && ::fstat(fd, &st) == 0 && st.st_size == after;
  if (at_end && ::ftruncate(fd, after - n) != 0) {
    // Nothing better to do: the record still goes to stderr whole.
  }
  return after >= 0 && static_cast<std::uint64_t>(after) >= file_size_limit() ? EFBIG : ENOSPC;
}

// stdout, stderr or a pipe or device named as the destination: the whole record, continuing
// partial writes (pipes), never raising SIGPIPE (quiet_write.hpp: EPIPE instead). A regular file
// (stdout redirected to one) has the file-size limit: read again each kCheckAhead bytes, and
// checked for every record once a limit is in force. Returns 0 or the errno.
int LogSink::write_stream(int fd, std::string_view record, StreamKind kind, bool regular) noexcept {
  if (regular) {
    const std::uint64_t written = written_end_.fetch_add(record.size(), std::memory_order_relaxed) + record.size();
    std::uint64_t limit = limit_.load(std::memory_order_relaxed);
    if (limit != kNoFileSizeLimit || written > checked_end_.load(std::memory_order_relaxed)) {
      limit = file_size_limit();
      limit_.store(limit, std::memory_order_relaxed);
      checked_end_.store(written + kCheckAhead, std::memory_order_relaxed);
      if (int error = check_limit(fd, record.size(), limit); error != 0) return error;
    }
  }
  return write_all(fd, record.data(), record.size(), kind);
}

void LogSink::write(std::string_view record) noexcept {
  if (per_process_ && opened_in_.load(std::memory_order_acquire) != g_fork_generation.load(std::memory_order_relaxed))
    reopen_after_fork();
  const int fd = fd_.load(std::memory_order_relaxed);
  if (fd < 0) return;  // stopped: the reader went away
  // stderr as the fallback may be anything; as the destination it was looked at once, at open.
  const bool fallback = fd == 2 && fallback_.load(std::memory_order_relaxed);
  const StreamKind kind = fallback ? StreamKind::Pipe : kind_.load(std::memory_order_relaxed);
  const bool regular = regular_.load(std::memory_order_relaxed);
  const int error = fd == owned_ && regular ? append(fd, record) : write_stream(fd, record, kind, regular);
  if (error != 0) [[unlikely]] write_failed(fd, record, error);
}

// The record could not be written to `fd` (`error`, an errno).
[[gnu::cold]] void LogSink::write_failed(int fd, std::string_view record, int error) noexcept {
  if (error == EPIPE) return stop(fd);
  if (fd == 2) return;  // stderr itself failed: nowhere left to write
  fall_back(error);
  if (write_stream(2, record, StreamKind::Pipe, regular_.load(std::memory_order_relaxed)) == EPIPE) stop(2);
}

}  // namespace mate::core
