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

#include "mate/core/file_size_limit.hpp"
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

// Reserving ahead keeps fallocate off most writes; what is reserved past the last record stays
// allocated beyond the end of the file (KEEP_SIZE: the file's size is unchanged).
constexpr std::uint64_t kReserveAhead = 16 * 1024;

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

bool is_regular(int fd, struct stat* st) noexcept { return ::fstat(fd, st) == 0 && S_ISREG(st->st_mode); }

// EFBIG when writing `size` bytes to `fd` would cross RLIMIT_FSIZE (the kernel would raise
// SIGXFSZ); 0 otherwise. Only regular files have the limit; unlimited is the common, cheap case.
int check_limit(int fd, std::size_t size) noexcept {
  const std::uint64_t limit = file_size_limit();
  if (limit == kNoFileSizeLimit) return 0;
  struct stat st {};
  if (!is_regular(fd, &st)) return 0;
  const int flags = ::fcntl(fd, F_GETFL);
  const off_t pos = flags >= 0 && (flags & O_APPEND) ? st.st_size : ::lseek(fd, 0, SEEK_CUR);
  return pos >= 0 && static_cast<std::uint64_t>(pos) + size > limit ? EFBIG : 0;
}

// stdout, stderr or a pipe or device named as the destination: the whole record, continuing
// partial writes (pipes), never raising SIGPIPE (quiet_write.hpp: EPIPE instead). Returns 0 or
// the errno.
int write_stream(int fd, const char* data, std::size_t size, StreamKind kind) noexcept {
  if (int error = check_limit(fd, size); error != 0) return error;
  return write_all(fd, data, size, kind);
}

void say(const std::string& message) noexcept { write_stderr(message); }

}  // namespace

std::unique_ptr<LogSink> LogSink::open(std::string_view destination) {
  std::unique_ptr<LogSink> sink(new LogSink());
  if (destination.empty() || destination == "stdout") {
    sink->path_ = "stdout";
    sink->fd_ = 1;
    sink->kind_.store(stream_kind(1), std::memory_order_relaxed);
    return sink;
  }
  if (destination == "stderr") {
    sink->path_ = "stderr";
    sink->fd_ = 2;
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
  reserved_end_.store(0, std::memory_order_relaxed);
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
// of space halfway. Returns 0, or the errno that means the record does not fit.
int LogSink::reserve(int fd, std::uint64_t size, std::uint64_t bytes, std::uint64_t limit) noexcept {
  const std::uint64_t end = size + bytes;
  if (reserve_unsupported_.load(std::memory_order_relaxed) || end <= reserved_end_.load(std::memory_order_relaxed))
    return 0;
  // Ahead, but never past RLIMIT_FSIZE: tmpfs checks the limit (and raises SIGXFSZ) even for
  // space reserved beyond the end of the file.
  std::uint64_t ahead = std::min(std::max(end, size + kReserveAhead), limit);
  for (std::uint64_t want : {ahead, end}) {
    int r;
    do {
      r = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(size), static_cast<off_t>(want - size));
    } while (r != 0 && errno == EINTR);
    if (r == 0) {
      reserved_end_.store(want, std::memory_order_relaxed);
      return 0;
    }
    if (errno != ENOSPC && errno != EDQUOT && errno != EFBIG) {
      // No fallocate here (some FUSE and network file systems): write unreserved; append()
      // takes a partial record back.
      reserve_unsupported_.store(true, std::memory_order_relaxed);
      return 0;
    }
    if (want == end) return errno;
  }
  return 0;
}

// One record onto the sink's own O_APPEND file: whole, or nothing. Returns 0 or the errno.
int LogSink::append(int fd, std::string_view record) noexcept {
  // Under a file-size limit, the check and the write go together: another thread's record landing
  // between them could put the end at the limit, and a write starting there raises SIGXFSZ.
  // (Unlimited, the common case, takes no lock.) Processes sharing the file near the limit can
  // still race; nothing short of changing the signal's disposition closes that.
  const std::uint64_t limit = file_size_limit();
  std::unique_lock<std::mutex> lock(limit_mutex_, std::defer_lock);
  if (limit != kNoFileSizeLimit) lock.lock();
  struct stat st {};
  if (!is_regular(fd, &st)) return write_stream(fd, record.data(), record.size(), kind_.load(std::memory_order_relaxed));  // a FIFO, /dev/null
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size), bytes = record.size();
  if (size + bytes > limit) return EFBIG;
  if (int error = reserve(fd, size, bytes, limit); error != 0) return error;
  ssize_t n;
  do {
    n = ::write(fd, record.data(), record.size());
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(bytes)) return 0;
  if (n <= 0) return n < 0 ? errno : ENOSPC;
  // Short: out of space after all (unreserved, or another process took the reserved blocks), or
  // stopped at the file-size limit (another process's append moved ours past the check above).
  // Continuing would tear the record; take the part back when it is still the file's end.
  // (Another process appending between the fstat and the ftruncate would lose its record; that
  // needs a full disk and a write landing within those few microseconds.)
  const bool at_end =
      ::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) == size + static_cast<std::uint64_t>(n);
  const bool at_limit = static_cast<std::uint64_t>(st.st_size) >= limit;
  if (at_end && ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    // Nothing better to do: the record still goes to stderr whole.
  }
  return at_limit ? EFBIG : ENOSPC;
}

void LogSink::write(std::string_view record) noexcept {
  if (per_process_ && opened_in_.load(std::memory_order_acquire) != g_fork_generation.load(std::memory_order_relaxed))
    reopen_after_fork();
  const int fd = fd_.load(std::memory_order_relaxed);
  if (fd < 0) return;  // stopped: the reader went away
  // stderr as the fallback may be anything; as the destination it was looked at once, at open.
  const StreamKind kind = fd == 2 && fallback_.load(std::memory_order_relaxed) ? StreamKind::Pipe
                                                                             : kind_.load(std::memory_order_relaxed);
  const int error = fd == owned_ ? append(fd, record) : write_stream(fd, record.data(), record.size(), kind);
  if (error == 0) return;
  if (error == EPIPE) return stop(fd);
  if (fd == 2) return;  // stderr itself failed: nowhere left to write
  fall_back(error);
  if (write_stream(2, record.data(), record.size(), StreamKind::Pipe) == EPIPE) stop(2);
}

}  // namespace mate::core
