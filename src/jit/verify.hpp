// Checking a library against its manifest before dlopen, and the "verified" stamp that lets a
// later check skip the content hash while the file is provably unchanged.
//
// A stamp records what fstat said of the library when its bytes last matched the manifest's
// hash (device, inode, size, mtime and ctime in ns) and that hash. A check opens the library
// once, fstats that descriptor, and when the stamp names the same file with the same times and
// the hash the manifest records, the hash is skipped: the kernel sets ctime on every change to
// a file's content or metadata (write, truncate, chmod, utimensat, a rename over it gives
// another inode) and user space cannot set it back. What a stamp cannot see: bytes changed below
// the file system (a disk returning other bits); `mate module-status --verify` hashes anyway.
// Stamps are a cache: a missing, damaged or stale one costs one hash and is written again.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>

#include "jit/cache.hpp"

namespace mate::jit::detail {

// The fields of a file's fstat that a change to it, or its replacement, changes.
struct FileIdentity {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
FileIdentity identity_of(const struct stat& st);

// Where a library's stamp is kept and what it names ("" file: no stamp is kept).
struct StampLocation {
  std::string file;
  std::string subject;  // the library as the stamp names it, compared on reading
};
// A JIT cache entry's: <entry>/verified.json, naming its library by file name (the stamp sits
// beside it; the entry may be reached through other paths, e.g. a workspace base via a link).
StampLocation entry_stamp(const std::string& entry_dir, const Manifest& m);
// An AOT module's: its install directory may be read-only, so the stamp is kept in the JIT
// cache, <cache root>/aot-verified/<xxh3-128 of the library's path>.json, naming the library by
// path. No location when there is no cache root (no HOME): such modules are hashed every time.
StampLocation aot_stamp(const std::string& library_path);

// A library that passed check_library, still open: the loader dlopens it by path, then asks
// still_unchanged() whether the path still names this file, unchanged.
class CheckedLibrary {
 public:
  CheckedLibrary() = default;
  CheckedLibrary(CheckedLibrary&& other) noexcept;
  CheckedLibrary& operator=(CheckedLibrary&& other) noexcept;
  CheckedLibrary(const CheckedLibrary&) = delete;
  CheckedLibrary& operator=(const CheckedLibrary&) = delete;
  ~CheckedLibrary();

  const std::string& path() const noexcept { return path_; }
  // After a dlopen of path(): true when the open file is unchanged since the check and path()
  // still names it (neither written nor renamed over meanwhile), so the dlopen loaded the bytes
  // that were checked, unless path() was replaced and put back in between.
  bool still_unchanged() const;

 private:
  friend std::string check_library(const std::string&, const Manifest&, const StampLocation&, const CheckOptions&,
                                   CheckedLibrary*);
  int fd_ = -1;
  std::string path_;
  FileIdentity identity_;
};

// Checks the library at `path` against `m`: a regular file starting with the ELF magic, of the
// size and (hashed, unless a valid stamp at `stamp` vouches for it) the content hash the
// manifest recorded. Returns "" and, when `out` is given, the open library; else why it is not
// sound (the messages name m.library). A hash that matched is stamped (options.write_stamp);
// one that did not removes the stamp, so that later checks hash too.
std::string check_library(const std::string& path, const Manifest& m, const StampLocation& stamp,
                          const CheckOptions& options = {}, CheckedLibrary* out = nullptr);

// The XXH3-128 of the file at `path` (32 hex digits), or nullopt with `why` naming the failure.
// `identity`, when given, gets the file's identity as hashed when a stamp may vouch for it: none
// when the file changed while it was hashed, or last changed in the tick of the kernel's file
// clock in which hashing began (a later change in that tick could leave its ctime as it is).
std::optional<std::string> library_content_hash(const std::string& path, std::string* why,
                                                std::optional<FileIdentity>* identity = nullptr);

// Writes a stamp saying that the library with `identity` matched `hash` (an identity that
// library_content_hash returned). Best effort: a stamp that cannot be written (read-only
// directory, full disk) only means that the next check hashes.
void write_stamp(const StampLocation& stamp, const FileIdentity& identity, const std::string& hash);

// How many libraries this process has hashed (tests and the benchmark use it to tell a hash
// from a stamped check).
std::uint64_t libraries_hashed() noexcept;

}  // namespace mate::jit::detail
