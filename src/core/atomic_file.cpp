#include "mate/core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "mate/core/file_size_limit.hpp"

namespace mate::core {

std::error_code write_file_atomically(const std::string& path, std::string_view content,
                                      unsigned mode, std::string* failed_step) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                          std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  auto fail = [&](const char* step, int fd) {
    std::error_code ec(errno, std::generic_category());
    if (failed_step != nullptr) *failed_step = step;
    if (fd >= 0) close(fd);
    unlink(tmp.c_str());
    return ec;
  };
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return fail("create temporary file", -1);
  if (exceeds_file_size_limit(content.size())) {
    errno = EFBIG;  // as a full disk would fail it, instead of SIGXFSZ killing the program
    return fail("write", fd);
  }
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write", fd);
    }
    done += static_cast<std::size_t>(n);
  }
  if (fchmod(fd, mode) != 0) return fail("chmod", fd);
  if (fsync(fd) != 0) return fail("fsync", fd);
  if (close(fd) != 0) return fail("close", -1);
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail("rename", -1);
  return {};
}

}  // namespace mate::core
