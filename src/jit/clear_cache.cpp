// `mate clear-cache`: the cache directory renamed away atomically, then deleted, and what earlier
// clear-cache runs killed midway left behind.
#include "mate/jit/clear_cache.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "jit/cache.hpp"
#include "mate/jit/module.hpp"

namespace mate::jit {

using namespace detail;
namespace fs = std::filesystem;

namespace {

constexpr const char* kTrashPrefix = ".mate-trash-";

// Removes what a clear-cache killed midway left: .mate-trash-<pid>-<n>@<host> directories under
// `parent`, of this host (a host name holds no '@', so the name parses from the end without
// doubt), whose process is dead. One whose process lives is still being deleted by it.
void remove_dead_trash(const std::string& parent, ClearResult& r) {
  const std::string suffix = "@" + hostname();
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(kTrashPrefix, 0) != 0 || name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string middle = name.substr(std::strlen(kTrashPrefix), name.size() - suffix.size() - std::strlen(kTrashPrefix));
    char* after = nullptr;
    long pid = std::strtol(middle.c_str(), &after, 10);
    if (pid <= 0 || after == nullptr || *after != '-') continue;
    char* end_of_n = nullptr;
    (void)std::strtol(after + 1, &end_of_n, 10);
    if (end_of_n == after + 1 || *end_of_n != '\0') continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    r.leftover_bytes += directory_size(it->path().string());
    r.leftovers.push_back(it->path().string());
    remove_tree(it->path().string());
  }
}

}  // namespace

ClearResult clear_cache(bool all_versions) {
  ClearResult r;
  const std::string base = workspace_base();
  r.path = all_versions ? base + "/.cache/mate" : cache_root();
  remove_dead_trash(base + "/.cache/mate", r);
  remove_dead_trash(base + "/.cache", r);
  struct stat st {};
  if (::stat(r.path.c_str(), &st) != 0) return r;
  // Only a directory can be the cache: anything else there is not MATE's to delete.
  if (!S_ISDIR(st.st_mode))
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("{} is not a directory, so not a MATE cache: left as it is", r.path));
  r.existed = true;
  r.bytes = directory_size(r.path);
  // Rename first: processes see the whole cache or none of it, never a half-deleted entry. The
  // name says whose it is, so a later run can finish the job if this one is killed.
  static std::atomic<unsigned> counter{0};
  std::string parent = fs::path(r.path).parent_path().string();
  std::string trash = fmt::format("{}/{}{}-{}@{}", parent, kTrashPrefix, getpid(), counter++, hostname());
  if (::rename(r.path.c_str(), trash.c_str()) != 0)
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("cannot remove {}: {}", r.path, std::strerror(errno)));
  remove_tree(trash);
  return r;
}

}  // namespace mate::jit
