// Private helpers of the dump component: files created 0600 and written completely or removed,
// and dtype names.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "mate/tensor/dtype.hpp"

namespace mate::dump::detail {

// A new file (O_EXCL, mode 0600) that is removed on destruction unless commit() succeeded.
class NewFile {
 public:
  explicit NewFile(std::string path);
  ~NewFile();
  NewFile(const NewFile&) = delete;
  NewFile& operator=(const NewFile&) = delete;

  bool ok() const noexcept { return error_.empty(); }
  const std::string& error() const noexcept { return error_; }
  // Appends; on failure records "write <path>: <strerror>" and returns false.
  bool write(const void* data, std::size_t bytes);
  // Closes the file; keeps it only when every step succeeded.
  bool commit();
  std::uint64_t written() const noexcept { return written_; }

 private:
  void fail(const char* step);
  std::string path_;
  int fd_ = -1;
  bool created_ = false;
  bool committed_ = false;
  std::uint64_t written_ = 0;
  std::string error_;
};

// Reads a whole file. Throws DumpError naming the file.
std::string read_file(const std::string& path);

// The ScalarType named `name` by tensor::dtype_name ("f32", "bf16", ...).
std::optional<tensor::ScalarType> scalar_type_named(std::string_view name);

// Checked arithmetic for sizes read from untrusted files.
bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out);

}  // namespace mate::dump::detail
