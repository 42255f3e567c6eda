#include "mate/core/test_shard.hpp"

namespace mate::core {

std::string_view test_file_key(std::string_view file) noexcept {
  std::size_t cut = file.rfind('/');
  if (cut == std::string_view::npos || cut == 0) return file;
  cut = file.rfind('/', cut - 1);
  return cut == std::string_view::npos ? file : file.substr(cut + 1);
}

std::int64_t shard_of_test_file(std::string_view file, std::int64_t total) noexcept {
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (char c : test_file_key(file)) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return static_cast<std::int64_t>(hash % static_cast<std::uint64_t>(total < 1 ? 1 : total));
}

}  // namespace mate::core
