// Writes that never raise SIGPIPE, and directories with explicit modes (quiet_write.hpp).
#include "mate/core/quiet_write.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace mate::core {

namespace {

int write_plain(int fd, const char* p, std::size_t size, bool socket) noexcept {
  while (size > 0) {
    const ssize_t n = socket ? ::send(fd, p, size, MSG_NOSIGNAL) : ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

int write_sigpipe_blocked(int fd, const char* p, std::size_t size) noexcept {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  if (::pthread_sigmask(SIG_BLOCK, &pipe_only, &old) != 0) return write_plain(fd, p, size, false);
  const bool blocked_before = sigismember(&old, SIGPIPE) == 1;
  // Only a thread that already blocked SIGPIPE can have one pending here (an unblocked one would
  // have been delivered): such a signal is the program's and stays pending.
  bool pending_before = false;
  if (blocked_before) {
    sigset_t pending;
    pending_before = ::sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  }
  const int error = write_plain(fd, p, size, false);
  if (error == EPIPE && !pending_before) {
    // The write raised SIGPIPE at this thread; take it off before the mask is restored.
    sigset_t pending;
    if (::sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{0, 0};
      while (::sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
  }
  if (!blocked_before) ::pthread_sigmask(SIG_UNBLOCK, &pipe_only, nullptr);
  return error;
}

}  // namespace

StreamKind stream_kind(int fd) noexcept {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return StreamKind::Pipe;
  if (S_ISSOCK(st.st_mode)) return StreamKind::Socket;
  if (S_ISREG(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return StreamKind::Plain;
  return StreamKind::Pipe;
}

int write_all(int fd, const void* data, std::size_t size, StreamKind kind) noexcept {
  const char* p = static_cast<const char*>(data);
  switch (kind) {
    case StreamKind::Plain: return write_plain(fd, p, size, false);
    case StreamKind::Socket: {
      const int error = write_plain(fd, p, size, true);
      // Not a socket after all (the descriptor was replaced): as a pipe.
      return error == ENOTSOCK ? write_sigpipe_blocked(fd, p, size) : error;
    }
    case StreamKind::Pipe: break;
  }
  return write_sigpipe_blocked(fd, p, size);
}

void write_stderr(std::string_view text) noexcept {
  const int saved = errno;
  write_all(2, text.data(), text.size(), StreamKind::Pipe);
  errno = saved;
}

int create_directories(const std::string& dir, mode_t mode) noexcept {
  if (dir.empty()) return 0;
  // Each prefix ending before a '/', then the whole path.
  std::string prefix;
  try {
    prefix.reserve(dir.size());  // assign() below then never allocates
  } catch (...) {
    return ENOMEM;
  }
  for (std::size_t i = 0; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    prefix.assign(dir, 0, i);
    if (prefix.empty() || prefix == "." || prefix == "..") continue;
    if (::mkdir(prefix.c_str(), mode) == 0) continue;
    const int error = errno;
    struct stat st {};
    if (error == EEXIST || error == EACCES || error == EROFS || error == EPERM) {
      // An existing component (or one we may not create but may pass through) must be a directory.
      if (::stat(prefix.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode)) return ENOTDIR;
        continue;
      }
    }
    return error;
  }
  return 0;
}

}  // namespace mate::core
