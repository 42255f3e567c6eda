// The process's memory-map entries counted from /proc/self/maps with plain system calls (see
// map_entries.hpp).
#include "guard/platform/map_entries.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace mate::guard {

bool count_map_entries(std::size_t* out) noexcept {
  const int saved_errno = errno;
  int fd;
  do fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    errno = saved_errno;
    return false;
  }
  char chunk[4096];
  std::size_t lines = 0;
  ssize_t n;
  for (;;) {
    n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) lines += chunk[i] == '\n';
  }
  ::close(fd);
  errno = saved_errno;
  if (n < 0) return false;
  *out = lines;
  return true;
}

}  // namespace mate::guard
