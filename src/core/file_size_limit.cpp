#include "mate/core/file_size_limit.hpp"

#include <sys/resource.h>

namespace mate::core {

std::uint64_t file_size_limit() noexcept {
  rlimit lim{};
  if (::getrlimit(RLIMIT_FSIZE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return kNoFileSizeLimit;
  return static_cast<std::uint64_t>(lim.rlim_cur);
}

// The kernel allows a write that ends exactly at the limit; one byte more raises SIGXFSZ.
bool exceeds_file_size_limit(std::uint64_t end) noexcept { return end > file_size_limit(); }

}  // namespace mate::core
