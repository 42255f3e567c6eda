#include "file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <limits>
#include <new>
#include <stdexcept>

#include "mate/core/file_size_limit.hpp"
#include "mate/dump/tensor_file.hpp"

namespace mate::dump::detail {

std::string temporary_name(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + name + ".tmp." + std::to_string(::getpid());
}

std::string sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return "open " + dir + ": " + std::strerror(errno);
  std::string error;
  if (::fsync(fd) != 0) error = "fsync " + dir + ": " + std::strerror(errno);
  ::close(fd);
  return error;
}

NewFile::NewFile(std::string path) : path_(std::move(path)), tmp_(temporary_name(path_)) {
  // The rename checks again; this check only saves writing a file that cannot be kept.
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0) {
    errno = EEXIST;
    fail("create");
    return;
  }
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd_ < 0 && errno == EEXIST) {
    // The temporary's name carries this process's pid and no process writes one name twice, so
    // it is the leftover of a process killed mid-write whose pid this one now has: replaced.
    ::unlink(tmp_.c_str());
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd_ < 0) fail("create");
  created_ = fd_ >= 0;
}

NewFile::~NewFile() {
  if (fd_ >= 0) ::close(fd_);
  discard();
}

void NewFile::discard() noexcept {
  // Only a temporary this object created is removed.
  if (created_ && !committed_) ::unlink(tmp_.c_str());
  created_ = false;
}

void NewFile::fail(const char* step) {
  // Messages name the file the caller asked for; the temporary is an implementation detail.
  if (error_.empty()) error_ = std::string(step) + " " + path_ + ": " + std::strerror(errno);
}

bool NewFile::write(const void* data, std::size_t bytes) {
  if (!ok()) return false;
  // The file is new and only this object writes it, so `written_` is its size.
  if (core::exceeds_file_size_limit(written_ + bytes)) {
    errno = EFBIG;  // fails like a full disk, instead of SIGXFSZ killing the program
    fail("write");
    return false;
  }
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

bool NewFile::write_at(std::uint64_t offset, const void* data, std::size_t bytes) {
  if (!ok()) return false;
  if (offset > written_ || bytes > written_ - offset) {
    errno = EINVAL;
    fail("write");
    return false;
  }
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) errno = EIO;
      fail("write");
      return false;
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

namespace {

bool unsupported(int error) { return error == EINVAL || error == ENOSYS || error == ENOTSUP || error == EPERM; }

// rename(2) that never replaces `to`: renameat2(RENAME_NOREPLACE) where the file system has it,
// else link + unlink (link fails on an existing name too), else — a file system with neither
// (vfat, exFAT, some FUSE mounts) or a sandbox refusing them — a plain rename after checking that
// `to` does not exist: the race it leaves cannot come from the writer, which never writes one
// name twice (each call directory belongs to one pid and sequence number).
int rename_no_replace(const char* from, const char* to) {
  if (::renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
  if (!unsupported(errno)) return -1;
  if (::link(from, to) == 0) {
    ::unlink(from);  // if this fails the temporary stays beside the complete file; nothing names it
    return 0;
  }
  if (errno != EPERM && errno != EOPNOTSUPP) return -1;
  struct stat st {};
  if (::lstat(to, &st) == 0) {
    errno = EEXIST;
    return -1;
  }
  return ::rename(from, to);
}

}  // namespace

bool NewFile::commit() {
  if (!ok()) return false;
  // Data on disk before the name: after a crash the name holds the complete file or nothing
  // (call.json, written by core::write_file_atomically, is fsynced before its rename too).
  if (::fsync(fd_) != 0) {
    fail("fsync");
    return false;
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    fail("close");
    return false;
  }
  if (rename_no_replace(tmp_.c_str(), path_.c_str()) != 0) {
    fail("rename");
    return false;
  }
  committed_ = true;
  return true;
}

namespace {

const char* file_type(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

[[noreturn]] void reject_link(const std::string& path, std::string_view what) {
  throw DumpError(path + " is a symbolic link: " + std::string(what) +
                  " inside a dump is read only where it is, links are not followed");
}

}  // namespace

DumpError out_of_memory(std::string_view what, std::uint64_t bytes) {
  return DumpError(std::string(what) + ": out of memory: reading it needs " + std::to_string(bytes) + " bytes (" +
                   std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB) that could not be allocated");
}

// A vector of `bytes` (value-initialized), or the DumpError saying that memory ran out.
std::vector<std::uint8_t> data_buffer(std::uint64_t bytes, std::string_view what) {
  try {
    if (bytes > std::vector<std::uint8_t>().max_size()) throw std::bad_alloc();
    return std::vector<std::uint8_t>(static_cast<std::size_t>(bytes));
  } catch (const std::bad_alloc&) {
    throw out_of_memory(what, bytes);
  } catch (const std::length_error&) {
    throw out_of_memory(what, bytes);
  }
}

DumpFile::DumpFile(const std::string& path) : path_(path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) reject_link(path, "a file");
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0) {
    if (errno == ELOOP) reject_link(path, "a file");
    throw DumpError("cannot open " + path + ": " + std::strerror(errno));
  }
  if (::fstat(fd_, &st) != 0) {
    const int error = errno;
    ::close(fd_);
    throw DumpError("cannot read " + path + ": " + std::strerror(error));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw DumpError(path + " is " + file_type(st.st_mode) + ", not a regular file: a dump holds regular files only");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

DumpFile::~DumpFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DumpFile::read_at(std::uint64_t offset, void* into, std::size_t bytes) const {
  char* p = static_cast<char*>(into);
  while (bytes > 0) {
    const std::size_t chunk = std::min<std::size_t>(bytes, std::size_t{1} << 30);
    const ssize_t n = ::pread(fd_, p, chunk, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw DumpError("cannot read " + path_ + ": " + std::strerror(errno));
    }
    if (n == 0) throw DumpError(path_ + ": truncated: the file shrank while it was read");
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
}

std::string DumpFile::read_string(std::uint64_t offset, std::size_t bytes) const {
  std::string out;
  try {
    out.resize(bytes);
  } catch (const std::bad_alloc&) {
    throw out_of_memory(path_, bytes);
  } catch (const std::length_error&) {
    throw out_of_memory(path_, bytes);
  }
  read_at(offset, out.data(), bytes);
  return out;
}

std::string read_file(const std::string& path) {
  const DumpFile file(path);
  if (file.size() > std::numeric_limits<std::size_t>::max()) throw out_of_memory(path, file.size());
  return file.read_string(0, static_cast<std::size_t>(file.size()));
}

void check_not_a_link(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) reject_link(path, what);
}

void check_directories_inside(const std::string& dir, const std::string& relative) {
  std::string at = dir;
  while (at.size() > 1 && at.back() == '/') at.pop_back();  // "link/" names a linked --dir
  std::size_t from = 0;
  for (std::size_t slash; (slash = relative.find('/', from)) != std::string::npos; from = slash + 1) {
    if (slash == from) continue;
    at += "/" + relative.substr(from, slash - from);
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) throw DumpError("cannot open " + at + ": " + std::strerror(errno));
    if (S_ISLNK(st.st_mode)) reject_link(at, "a directory");
    if (!S_ISDIR(st.st_mode)) throw DumpError(at + " is " + file_type(st.st_mode) + ", not a directory");
  }
}

bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace mate::dump::detail
