// Private helpers of the dump component: files that appear under their name only once complete,
// and dtype names.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mate/dump/tensor_file.hpp"
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
  // Overwrites `bytes` already written at `offset` (a header field known only after the data).
  bool write_at(std::uint64_t offset, const void* data, std::size_t bytes);
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

// A dump file opened for reading. Readers open only what they expect: a regular file, named
// directly (O_NOFOLLOW: a symbolic link is rejected, so nothing outside the dump is read through
// one), opened without blocking (a FIFO in its place is rejected, never waited on). Every read is
// bounded by the file's size as opened. Throws DumpError naming the path.
class DumpFile {
 public:
  explicit DumpFile(const std::string& path);
  ~DumpFile();
  DumpFile(const DumpFile&) = delete;
  DumpFile& operator=(const DumpFile&) = delete;
  std::uint64_t size() const noexcept { return size_; }
  // Reads exactly `bytes` at `offset` (within size(); a file that shrank since is "truncated").
  void read_at(std::uint64_t offset, void* into, std::size_t bytes) const;
  // Reads `bytes` at `offset` into a new string (memory that cannot be had: out_of_memory()).
  std::string read_string(std::uint64_t offset, std::size_t bytes) const;
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// The DumpError for `bytes` that could not be allocated while reading `what`: memory ran out,
// which is not damage to the file.
DumpError out_of_memory(std::string_view what, std::uint64_t bytes);

// A buffer of `bytes` for a tensor's data read from `what`, or out_of_memory().
std::vector<std::uint8_t> data_buffer(std::uint64_t bytes, std::string_view what);

// Reads a whole (regular, not linked) file. Throws DumpError naming the file.
std::string read_file(const std::string& path);

// Rejects a symbolic link or non-directory among the directories of `relative` (a path inside
// `dir`, e.g. "inputs/00_a.mtensor": "inputs" is checked; the file itself is DumpFile's). Throws
// DumpError naming the path.
void check_directories_inside(const std::string& dir, const std::string& relative);

// Rejects `dir` when it is a symbolic link ("dir/", with the slash, resolves it: the caller
// named it). Throws DumpError naming the path.
void check_not_a_link(const std::string& path, std::string_view what);

// Checked arithmetic for sizes read from untrusted files.
bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out);

}  // namespace mate::dump::detail
