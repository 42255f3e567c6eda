#include "jit/cache.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "jit/hash.hpp"
#include "mate/config.hpp"
#include "mate/core/quiet_write.hpp"

namespace mate::jit::detail {

namespace fs = std::filesystem;

std::string workspace_base() {
  std::string base = config::workspace_base();
  if (!base.empty()) return base;
  base = config::home();
  if (!base.empty()) return base;
  if (const passwd* pw = getpwuid(getuid()); pw != nullptr && pw->pw_dir != nullptr) return pw->pw_dir;
  throw ModuleError(ModuleError::Kind::CacheError,
                    "cannot find a cache directory: MATE_WORKSPACE_BASE and HOME are unset and the "
                    "user has no home directory (set MATE_WORKSPACE_BASE)");
}

std::string cache_root() { return workspace_base() + "/.cache/mate/" + MATE_VERSION_STRING; }

std::string module_dir(const std::string& root, const Plan& plan) {
  return root + "/" + plan.arch + "/cached_ops/" + plan.spec.name;
}

std::string entry_dir(const std::string& root, const Plan& plan) {
  return module_dir(root, plan) + "/" + plan.key;
}

nlohmann::json to_json(const Manifest& m) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& i : m.inputs) inputs.push_back({{"name", i.name}, {"value", i.value}});
  return {{"format", 1},         {"name", m.name},         {"key", m.key},
          {"toolchain", m.toolchain}, {"arch", m.arch},    {"arch_list", m.arch_list},
          {"library", m.library}, {"built_at", m.built_at}, {"build_seconds", m.build_seconds},
          {"size", m.size},       {"library_xxh3_128", m.library_hash}, {"inputs", inputs}};
}

Manifest manifest_for(const Plan& plan) {
  Manifest m;
  m.name = plan.spec.name;
  m.key = plan.key;
  m.toolchain = std::string(to_string(plan.spec.toolchain));
  m.arch = plan.arch;
  m.arch_list = plan.arch_list;
  m.library = "module.so";
  m.inputs = plan.inputs;
  return m;
}

std::optional<Manifest> read_manifest(const std::string& dir, std::string* why) {
  std::ifstream in(dir + "/manifest.json", std::ios::binary);
  if (!in) {
    if (why) *why = "manifest.json is missing";
    return std::nullopt;
  }
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.at("format").get<int>() != 1) {
      if (why) *why = "manifest.json has an unknown format";
      return std::nullopt;
    }
    Manifest m;
    m.name = j.at("name").get<std::string>();
    m.key = j.at("key").get<std::string>();
    m.toolchain = j.at("toolchain").get<std::string>();
    m.arch = j.at("arch").get<std::string>();
    m.arch_list = j.at("arch_list").get<std::vector<std::string>>();
    m.library = j.at("library").get<std::string>();
    m.built_at = j.value("built_at", "");
    m.build_seconds = j.value("build_seconds", 0.0);
    m.size = j.value("size", std::uint64_t{0});
    m.library_hash = j.value("library_xxh3_128", "");
    for (const auto& i : j.at("inputs")) m.inputs.push_back({i.at("name").get<std::string>(), i.at("value").get<std::string>()});
    if (m.library.empty() || m.library.find('/') != std::string::npos) {
      if (why) *why = "manifest.json names an invalid library";
      return std::nullopt;
    }
    return m;
  } catch (const std::exception& e) {
    if (why) *why = std::string("manifest.json is malformed: ") + e.what();
    return std::nullopt;
  }
}

std::string check_entry(const std::string& dir, const Plan& plan, Manifest* out) {
  std::string why;
  auto m = read_manifest(dir, &why);
  if (!m) return why;
  if (m->name != plan.spec.name || m->key != plan.key)
    return fmt::format("manifest.json is for module '{}' key {}, not '{}' key {}", m->name, m->key,
                       plan.spec.name, plan.key);
  if (std::string why = library_problem(dir, *m); !why.empty()) return why;
  if (out) *out = std::move(*m);
  return "";
}

namespace {

// What one look at a library found: its size, the ELF magic, and the XXH3-128 of its bytes.
// Mapped rather than read: no copy, and the mapping's pages are the page-cache pages the dlopen
// that follows maps again (a read() copy measured about twice as slow on a 32 MiB library). A
// library truncated by someone else while it is hashed faults (SIGBUS) as it would under the
// dlopen itself; published entries are never modified, so only a hostile writer does that.
struct LibraryBytes {
  int error = 0;  // errno of open/fstat/mmap, 0 when none
  bool regular = false;
  std::uint64_t size = 0;
  bool elf = false;
  std::string hash;
};

LibraryBytes read_library(const std::string& path) {
  LibraryBytes r;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    r.error = errno;
    return r;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    r.error = errno;
  } else if ((r.regular = S_ISREG(st.st_mode))) {
    r.size = static_cast<std::uint64_t>(st.st_size);
    std::string_view bytes;
    void* p = MAP_FAILED;
    if (r.size > 0) {
      p = ::mmap(nullptr, r.size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      if (p == MAP_FAILED) r.error = errno;
      else bytes = std::string_view(static_cast<const char*>(p), r.size);
    }
    if (r.error == 0) {
      r.elf = bytes.size() >= 4 && std::memcmp(bytes.data(), "\x7f" "ELF", 4) == 0;
      r.hash = content_hash_hex(bytes);
    }
    if (p != MAP_FAILED) ::munmap(p, r.size);
  }
  ::close(fd);
  return r;
}

}  // namespace

std::optional<std::string> library_content_hash(const std::string& path, std::string* why) {
  LibraryBytes b = read_library(path);
  if (b.error != 0 || !b.regular) {
    if (why) *why = fmt::format("{} cannot be read: {}", path, b.error ? std::strerror(b.error) : "not a regular file");
    return std::nullopt;
  }
  return b.hash;
}

std::string library_problem(const std::string& dir, const Manifest& m) {
  LibraryBytes b = read_library(dir + "/" + m.library);
  if (b.error == ENOENT || (b.error == 0 && !b.regular)) return m.library + " is missing";
  if (b.error != 0) return fmt::format("{} cannot be read: {}", m.library, std::strerror(b.error));
  if (!b.elf) return m.library + " is not an ELF shared library";
  if (b.size != m.size)
    return fmt::format("{} has {} bytes but manifest.json recorded {} (truncated or replaced)", m.library, b.size,
                       m.size);
  if (m.library_hash.empty())
    return fmt::format("manifest.json records no content hash of {} (written by a MATE that did not check "
                       "them)", m.library);
  if (b.hash != m.library_hash)
    return fmt::format("{} does not match the content hash manifest.json recorded (xxh3-128 {}, the file's is "
                       "{}): its bytes were changed after it was built",
                       m.library, m.library_hash, b.hash);
  return "";
}

std::uint64_t directory_size(const std::string& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2) && !it->is_symlink(ec2)) total += it->file_size(ec2);
  }
  return total;
}

void remove_tree(const std::string& dir) noexcept {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

void make_directories(const std::string& dir) {
  // An explicit mode: under `umask 000`, std::filesystem would make them 0777.
  if (int error = core::create_directories(dir, 0755); error != 0)
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("cannot create cache directory {}: {} (check permissions or set "
                                  "MATE_WORKSPACE_BASE)",
                                  dir, std::strerror(error)));
}

std::string hostname() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace mate::jit::detail
