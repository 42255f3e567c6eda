// flock-based inter-process lock; see include/mate/core/file_lock.hpp for the contract.
#include "mate/core/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "mate/core/utc_time.hpp"

namespace mate::core {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::system_error(errno, std::generic_category(), what + " " + path);
}

int open_lock_file(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) fail("cannot open lock file", path);
  return fd;
}

std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw)
    if (c == '\0' || c == '\n') c = ' ';
  return raw;
}

// Records the holder. Failures are ignored: the description is advisory.
void write_holder(int fd) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string text = "pid=" + std::to_string(getpid()) + "\nhost=" + host +
                     "\ncmd=" + own_command_line() + "\nsince=" + utc_now_iso8601() + "\n";
  if (ftruncate(fd, 0) != 0) return;
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::string LockHolder::describe() const {
  if (pid == 0 && host.empty()) return "an unknown process";
  std::string out = "pid " + std::to_string(pid);
  if (!host.empty()) out += " on host " + host;
  if (!command.empty()) out += " (" + command + ")";
  if (!since.empty()) out += ", since " + since;
  return out;
}

FileLock FileLock::acquire(const std::string& path, const Options& options) {
  int fd = open_lock_file(path);
  auto start = std::chrono::steady_clock::now();
  bool notified = false;
  // Polling rather than a blocking flock lets the waiter speak up after `notify_after` without
  // signals or a second thread; the poll interval grows to 50 ms, small against a build.
  auto interval = std::chrono::milliseconds(2);
  for (;;) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int saved = errno;
      ::close(fd);
      errno = saved;
      fail("cannot lock", path);
    }
    auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    if (!notified && options.on_wait && waited >= options.notify_after) {
      notified = true;
      options.on_wait(read_holder(path).value_or(LockHolder{}), waited);
    }
    std::this_thread::sleep_for(interval);
    interval = std::min(interval * 2, std::chrono::milliseconds(50));
  }
  write_holder(fd);
  return FileLock(path, fd);
}

std::optional<FileLock> FileLock::try_acquire(const std::string& path) {
  int fd = open_lock_file(path);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int saved = errno;
    ::close(fd);
    if (saved == EWOULDBLOCK) return std::nullopt;
    errno = saved;
    fail("cannot lock", path);
  }
  write_holder(fd);
  return FileLock(path, fd);
}

std::optional<LockHolder> FileLock::read_holder(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  LockHolder h;
  std::string line;
  bool any = false;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    any = true;
    if (k == "pid") h.pid = std::strtol(v.c_str(), nullptr, 10);
    else if (k == "host") h.host = v;
    else if (k == "cmd") h.command = v;
    else if (k == "since") h.since = v;
  }
  if (!any) return std::nullopt;
  return h;
}

FileLock::FileLock(FileLock&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() { release(); }

void FileLock::release() noexcept {
  if (fd_ < 0) return;
  // Clear the holder text first so a later reader does not name a process that let go.
  if (ftruncate(fd_, 0) != 0) {
  }
  ::close(fd_);  // closing drops the flock
  fd_ = -1;
}

}  // namespace mate::core
