// Private helpers of the dump component: files that appear under their name only once complete,
// and dtype names.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "mate/tensor/dtype.hpp"

namespace mate::dump::detail {

// A new file (mode 0600) that appears under `path` only complete: it is written to a temporary
// beside it (temporary_name), fsynced, and renamed into place by commit(), never replacing an
// existing file. A crash leaves at most the temporary; any failure, or destruction before
// commit(), removes it. `path` must not exist (checked first, and again by the rename).
class NewFile {
 public:
  explicit NewFile(std::string path);
  ~NewFile();
  NewFile(const NewFile&) = delete;
  NewFile& operator=(const NewFile&) = delete;

  bool ok() const noexcept { return error_.empty(); }
  const std::string& error() const noexcept { return error_; }
  // Appends; on failure records "write <path>: <strerror>" and returns false. Bytes that would
  // take the file past RLIMIT_FSIZE are refused first, as EFBIG ("File too large"): SIGXFSZ would
  // kill the host program.
  bool write(const void* data, std::size_t bytes);
  // fsync, close, rename to `path`; keeps it only when every step succeeded.
  bool commit();
  std::uint64_t written() const noexcept { return written_; }
  const std::string& temporary() const noexcept { return tmp_; }

 private:
  void fail(const char* step);
  void discard() noexcept;
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  bool created_ = false;
  bool committed_ = false;
  std::uint64_t written_ = 0;
  std::string error_;
};

// `.<name>.tmp.<pid>` in the directory of `path` (<name> its file name): where NewFile writes
// before the rename. Readers never name such a file; a leftover one is an interrupted write.
std::string temporary_name(const std::string& path);

// fsyncs a directory, so that the renames into it are durable before anything names the files.
// Returns "" or what failed.
std::string sync_directory(const std::string& dir);

// Reads a whole file. Throws DumpError naming the file.
std::string read_file(const std::string& path);

// The ScalarType named `name` by tensor::dtype_name ("f32", "bf16", ...).
std::optional<tensor::ScalarType> scalar_type_named(std::string_view name);

// Checked arithmetic for sizes read from untrusted files.
bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out);

}  // namespace mate::dump::detail
