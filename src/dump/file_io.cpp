#include "file_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "mate/dump/tensor_file.hpp"

namespace mate::dump::detail {

NewFile::NewFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd_ < 0) fail("create");
  created_ = fd_ >= 0;
}

NewFile::~NewFile() {
  if (fd_ >= 0) ::close(fd_);
  // Only a file this object created is removed (O_EXCL failing means it is someone else's).
  if (created_ && !committed_) ::unlink(path_.c_str());
}

void NewFile::fail(const char* step) {
  if (error_.empty()) error_ = std::string(step) + " " + path_ + ": " + std::strerror(errno);
}

bool NewFile::write(const void* data, std::size_t bytes) {
  if (!ok()) return false;
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
      return false;
    }
    if (n == 0) {
      errno = ENOSPC;
      fail("write");
      return false;
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
    written_ += static_cast<std::uint64_t>(n);
  }
  return true;
}

bool NewFile::commit() {
  if (!ok()) return false;
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    fail("close");
    return false;
  }
  committed_ = true;
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DumpError("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw DumpError("cannot read " + path);
  return std::move(s).str();
}

std::optional<tensor::ScalarType> scalar_type_named(std::string_view name) {
  for (int i = 0; i < static_cast<int>(tensor::ScalarType::Unsupported); ++i) {
    auto s = static_cast<tensor::ScalarType>(i);
    if (tensor::dtype_name(tensor::dl_dtype(s)) == name) return s;
  }
  return std::nullopt;
}

bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace mate::dump::detail
