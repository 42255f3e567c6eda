#include "jit/verify.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "jit/hash.hpp"
#include "mate/core/atomic_file.hpp"
#include "mate/core/quiet_write.hpp"

namespace mate::jit::detail {

namespace {

std::atomic<std::uint64_t> g_hashed{0};

constexpr std::size_t kMaxStampBytes = 4096;  // a stamp is ~250 bytes: anything larger is not one

// Closes a descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

std::int64_t ns(const timespec& t) { return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; }

std::int64_t coarse_now_ns() {
  timespec now {};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return ns(now);
}

struct Hashed {
  std::string hash;
  // Whether a stamp may vouch for these bytes: the file did not change while it was hashed, and
  // its ctime is older than the tick of the kernel's file clock in which hashing began. Inode
  // times come from that coarse clock (or finer, once someone looked), so a change in the tick of
  // the last one could leave ctime as it is (the "racy git" problem); a change after that tick
  // always moves it.
  bool stampable = false;
};

// The hash of an open file with `identity`, or nullopt with errno set. Mapped rather than read:
// no copy, and the mapping's pages are the page-cache pages the dlopen that follows maps again
// (a read() copy measured about twice as slow on a 32 MiB library). A library truncated by
// someone else while it is hashed faults (SIGBUS) as it would under the dlopen itself.
std::optional<Hashed> hash_fd(int fd, const FileIdentity& identity) {
  g_hashed.fetch_add(1, std::memory_order_relaxed);
  const std::int64_t started = coarse_now_ns();
  Hashed h;
  if (identity.size == 0) {
    h.hash = content_hash_hex({});
  } else {
    void* p = ::mmap(nullptr, identity.size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) return std::nullopt;
    h.hash = content_hash_hex(std::string_view(static_cast<const char*>(p), identity.size));
    ::munmap(p, identity.size);
  }
  struct stat after {};
  h.stampable = identity.ctime_ns < started && ::fstat(fd, &after) == 0 && identity_of(after) == identity;
  return h;
}

struct Stamp {
  FileIdentity identity;
  std::string hash;
};

// The stamp at `where`, or nullopt when it is missing, damaged, or names another library.
std::optional<Stamp> read_stamp(const StampLocation& where) {
  if (where.file.empty()) return std::nullopt;
  Fd f{::open(where.file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  if (f.fd < 0) return std::nullopt;
  char buf[kMaxStampBytes + 1];
  std::size_t n = 0;
  while (n < sizeof buf) {
    ssize_t got = ::read(f.fd, buf + n, sizeof buf - n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    n += static_cast<std::size_t>(got);
  }
  if (n == 0 || n > kMaxStampBytes) return std::nullopt;
  const auto j = nlohmann::json::parse(buf, buf + n, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    if (j.at("format").get<int>() != 1 || j.at("library").get<std::string>() != where.subject) return std::nullopt;
    Stamp s;
    s.identity.dev = j.at("dev").get<std::uint64_t>();
    s.identity.ino = j.at("ino").get<std::uint64_t>();
    s.identity.size = j.at("size").get<std::uint64_t>();
    s.identity.mtime_ns = j.at("mtime_ns").get<std::int64_t>();
    s.identity.ctime_ns = j.at("ctime_ns").get<std::int64_t>();
    s.hash = j.at("library_xxh3_128").get<std::string>();
    return s;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a field missing or of another type: damaged
  }
}

void forget_stamp(const StampLocation& where) {
  if (!where.file.empty()) ::unlink(where.file.c_str());
}

}  // namespace

FileIdentity identity_of(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
}

StampLocation entry_stamp(const std::string& entry_dir, const Manifest& m) {
  return {entry_dir + "/verified.json", m.library};
}

StampLocation aot_stamp(const std::string& library_path) {
  std::string root;
  try {
    root = cache_root();
  } catch (const std::exception&) {
    return {};  // no HOME and no MATE_WORKSPACE_BASE: nowhere to keep it
  }
  return {root + "/aot-verified/" + content_hash_hex(library_path) + ".json", library_path};
}

void write_stamp(const StampLocation& where, const FileIdentity& identity, const std::string& hash) {
  if (where.file.empty()) return;
  nlohmann::json j = {{"format", 1},
                      {"library", where.subject},
                      {"dev", identity.dev},
                      {"ino", identity.ino},
                      {"size", identity.size},
                      {"mtime_ns", identity.mtime_ns},
                      {"ctime_ns", identity.ctime_ns},
                      {"library_xxh3_128", hash}};
  const std::string dir = std::filesystem::path(where.file).parent_path().string();
  if (core::create_directories(dir, 0755) != 0) return;
  (void)core::write_file_atomically(where.file, j.dump() + "\n", 0644);
}

CheckedLibrary::CheckedLibrary(CheckedLibrary&& other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)), identity_(other.identity_) {
  other.fd_ = -1;
}

CheckedLibrary& CheckedLibrary::operator=(CheckedLibrary&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
    path_ = std::move(other.path_);
    identity_ = other.identity_;
  }
  return *this;
}

CheckedLibrary::~CheckedLibrary() {
  if (fd_ >= 0) ::close(fd_);
}

bool CheckedLibrary::still_unchanged() const {
  struct stat open_file {}, named {};
  return fd_ >= 0 && ::fstat(fd_, &open_file) == 0 && identity_of(open_file) == identity_ &&
         ::stat(path_.c_str(), &named) == 0 && identity_of(named) == identity_;
}

std::string check_library(const std::string& path, const Manifest& m, const StampLocation& stamp,
                          const CheckOptions& options, CheckedLibrary* out) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  struct stat st {};
  if (f.fd < 0 && errno == ENOENT) return m.library + " is missing";
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0)
    return fmt::format("{} cannot be read: {}", m.library, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return m.library + " is missing";
  const FileIdentity identity = identity_of(st);
  // Whatever fails below, a stamp of this library no longer vouches for anything.
  auto problem = [&](std::string why) {
    forget_stamp(stamp);
    return why;
  };
  char magic[4] = {};
  if (::pread(f.fd, magic, sizeof magic, 0) != static_cast<ssize_t>(sizeof magic) ||
      std::memcmp(magic, "\x7f" "ELF", 4) != 0)
    return problem(m.library + " is not an ELF shared library");
  if (identity.size != m.size)
    return problem(fmt::format("{} has {} bytes but manifest.json recorded {} (truncated or replaced)", m.library,
                               identity.size, m.size));
  if (m.library_hash.empty())
    return problem(fmt::format("manifest.json records no content hash of {} (written by a MATE that did not check "
                               "them)", m.library));
  bool vouched = false;
  if (options.trust_stamp)
    if (auto s = read_stamp(stamp)) vouched = s->identity == identity && s->hash == m.library_hash;
  if (!vouched) {
    auto hashed = hash_fd(f.fd, identity);
    if (!hashed) return fmt::format("{} cannot be read: {}", m.library, std::strerror(errno));
    if (hashed->hash != m.library_hash)
      return problem(fmt::format("{} does not match the content hash manifest.json recorded (xxh3-128 {}, the "
                                 "file's is {}): its bytes were changed after it was built",
                                 m.library, m.library_hash, hashed->hash));
    if (options.write_stamp && hashed->stampable) write_stamp(stamp, identity, hashed->hash);
  }
  if (out) {
    *out = CheckedLibrary();
    out->fd_ = f.release();
    out->path_ = path;
    out->identity_ = identity;
  }
  return "";
}

std::optional<std::string> library_content_hash(const std::string& path, std::string* why,
                                                std::optional<FileIdentity>* identity) {
  auto fail = [&](const char* what) {
    if (why) *why = fmt::format("{} cannot be read: {}", path, what);
    return std::nullopt;
  };
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  struct stat st {};
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0) return fail(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail("not a regular file");
  auto hashed = hash_fd(f.fd, identity_of(st));
  if (!hashed) return fail(std::strerror(errno));
  if (identity) *identity = hashed->stampable ? std::optional<FileIdentity>(identity_of(st)) : std::nullopt;
  return hashed->hash;
}

std::uint64_t libraries_hashed() noexcept { return g_hashed.load(std::memory_order_relaxed); }

}  // namespace mate::jit::detail
