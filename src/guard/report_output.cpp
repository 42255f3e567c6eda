// The guard's output descriptors: the program's stderr kept from start-up and the report file
// (see report_output.hpp).
#include "guard/report_output.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "mate/core/signal_safe_format.hpp"

namespace mate::guard {

namespace {

// The lowest descriptor the duplicate may take: far above what programs open, below the usual
// soft limit of 1024.
constexpr int kHighDescriptor = 900;

enum : int { kNotKept = -1, kClosedAtStart = -2 };
constinit std::atomic<int> g_stderr{kNotKept};
dev_t g_stderr_device = 0;
ino_t g_stderr_inode = 0;

char g_pattern[PATH_MAX];  // "" = no report file
constinit std::atomic<int> g_file{-1};
constinit std::atomic<pid_t> g_file_pid{0};  // the process that opened g_file

// The kept descriptor, when it is still the file it was at start-up.
int program_stderr() noexcept {
  const int fd = g_stderr.load(std::memory_order_acquire);
  if (fd == kNotKept) return 2;
  if (fd == kClosedAtStart) return -1;
  struct stat now {};
  if (::fstat(fd, &now) == 0 && now.st_dev == g_stderr_device && now.st_ino == g_stderr_inode) return fd;
  return 2;
}

// "%i" replaced by `pid`; false when the result does not fit.
bool expand(const char* pattern, pid_t pid, char* out, std::size_t capacity) noexcept {
  const core::NumberText digits = core::decimal_text(static_cast<std::uint64_t>(pid));
  std::size_t n = 0;
  for (const char* p = pattern; *p != '\0'; ++p) {
    const bool is_pid = p[0] == '%' && p[1] == 'i';
    const char* piece = is_pid ? digits.chars : p;
    const std::size_t length = is_pid ? digits.size : 1;
    if (n + length >= capacity) return false;
    std::memcpy(out + n, piece, length);
    n += length;
    if (is_pid) ++p;
  }
  out[n] = '\0';
  return true;
}

// The report file of this process, opened at its first use (a forked child opens its own when
// the name has %i; otherwise it appends through the descriptor it inherited).
int report_file() noexcept {
  if (g_pattern[0] == '\0') return -1;
  const pid_t pid = ::getpid();
  const int fd = g_file.load(std::memory_order_acquire);
  const bool per_process = std::strstr(g_pattern, "%i") != nullptr;
  if (fd >= 0 && (!per_process || g_file_pid.load(std::memory_order_relaxed) == pid)) return fd;
  char path[PATH_MAX];
  if (!expand(g_pattern, pid, path, sizeof path)) return -1;
  const int opened = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0600);
  if (opened < 0) return -1;
  // Non-blocking was for the open only (a FIFO without a reader fails at once instead of hanging
  // the report); the report itself is written whole.
  if (const int flags = ::fcntl(opened, F_GETFL); flags >= 0) ::fcntl(opened, F_SETFL, flags & ~O_NONBLOCK);
  // Moved up out of the program's way, as the stderr copy is.
  int high = ::fcntl(opened, F_DUPFD_CLOEXEC, kHighDescriptor);
  if (high >= 0) {
    ::close(opened);
  } else {
    high = opened;
  }
  int expected = fd;
  if (!g_file.compare_exchange_strong(expected, high, std::memory_order_acq_rel)) {
    ::close(high);  // another thread of this process opened it first
    return expected;
  }
  if (fd >= 0) ::close(fd);  // the parent's, inherited across fork
  g_file_pid.store(pid, std::memory_order_relaxed);
  return high;
}

}  // namespace

void keep_program_stderr() noexcept {
  if (g_stderr.load(std::memory_order_relaxed) != kNotKept) return;
  struct stat st {};
  if (::fstat(2, &st) != 0) {
    g_stderr.store(kClosedAtStart, std::memory_order_release);
    return;
  }
  int lowest = kHighDescriptor;
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      limit.rlim_cur <= static_cast<rlim_t>(kHighDescriptor))
    lowest = static_cast<int>(limit.rlim_cur / 2);
  const int fd = ::fcntl(2, F_DUPFD_CLOEXEC, lowest);
  if (fd < 0) return;  // no descriptor free: fd 2 as it is
  g_stderr_device = st.st_dev;
  g_stderr_inode = st.st_ino;
  g_stderr.store(fd, std::memory_order_release);
}

bool set_report_file(const char* pattern) noexcept {
  if (pattern == nullptr) pattern = "";
  const std::size_t n = std::strlen(pattern);
  if (n >= sizeof g_pattern) return false;
  std::memcpy(g_pattern, pattern, n + 1);
  return true;
}

int report_fds(int fd, int out[2]) noexcept {
  if (fd != kReportOutput) {
    out[0] = fd;
    return 1;
  }
  const int saved_errno = errno;
  int n = 0;
  if (const int e = program_stderr(); e >= 0) out[n++] = e;
  if (const int f = report_file(); f >= 0) out[n++] = f;
  errno = saved_errno;
  return n;
}

}  // namespace mate::guard
