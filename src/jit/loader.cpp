// load_module(): AOT, then the JIT cache, then a locked build. See module.hpp for the contract.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "jit/aot.hpp"
#include "jit/build.hpp"
#include "jit/cache.hpp"
#include "jit/plan.hpp"
#include "jit/verify.hpp"
#include "mate/config.hpp"
#include "mate/core/file_lock.hpp"
#include "mate/jit/module.hpp"
#include "mate/device/vendors.hpp"

namespace mate::jit {

struct Module::State {
  std::string name, key, path;
  Origin origin;
  void* handle;
};

const std::string& Module::name() const noexcept { return state_->name; }
const std::string& Module::key() const noexcept { return state_->key; }
const std::string& Module::path() const noexcept { return state_->path; }
Origin Module::origin() const noexcept { return state_->origin; }

void* Module::symbol(std::string_view symbol_name) const {
  std::string s(symbol_name);
  dlerror();
  void* p = dlsym(state_->handle, s.c_str());
  if (p == nullptr)
    throw ModuleError(ModuleError::Kind::LoadFailed,
                      fmt::format("module '{}' ({}) has no symbol '{}' (exported functions need "
                                  "MATE_MODULE_EXPORT)",
                                  state_->name, state_->path, s));
  return p;
}

static_assert(static_cast<int>(Toolchain::Host) == static_cast<int>(device::Kind::Host));
static_assert(static_cast<int>(Toolchain::Cuda) == static_cast<int>(device::Kind::Cuda));
static_assert(static_cast<int>(Toolchain::Musa) == static_cast<int>(device::Kind::Musa));

device::Kind device_kind(Toolchain t) noexcept { return static_cast<device::Kind>(t); }

std::string_view to_string(Toolchain t) { return device::kind_name(device_kind(t)); }

std::string_view to_string(Origin o) {
  switch (o) {
    case Origin::Aot: return "aot";
    case Origin::JitCache: return "jit-cache";
    case Origin::JitBuilt: return "jit-built";
  }
  return "?";
}

namespace {

using namespace detail;

std::mutex& memo_mutex() {
  static std::mutex m;
  return m;
}
// Loaded modules by (cache root, AOT roots, JIT enabled, key): a second load is a map lookup.
std::map<std::string, std::shared_ptr<const Module::State>>& memo() {
  static std::map<std::string, std::shared_ptr<const Module::State>> m;
  return m;
}

void* try_dlopen(const std::string& path, std::string* error) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr && error) {
    const char* e = dlerror();
    *error = e ? e : "dlopen failed";
  }
  return h;
}

std::shared_ptr<const Module::State> make_state(const Plan& plan, const std::string& key,
                                                const std::string& path, Origin origin, void* handle) {
  return std::make_shared<const Module::State>(Module::State{plan.spec.name, key, path, origin, handle});
}

// A published entry: loaded, absent (*exists false), or structurally corrupt (`problem` says
// why, see check_entry). A structurally sound library that dlopen refuses is not corrupt: the
// cause is this process's environment (a runtime library not found, LD_LIBRARY_PATH), so that
// throws ModuleError(LoadFailed) and leaves the entry alone; rebuilding would not help. Unless
// the entry vanished between the check and the dlopen (`mate clear-cache`): then it is absent.
// The library is dlopened by path, after the check of the file opened there; a library that
// changed or was replaced between the two is unloaded and checked again (verify.hpp).
void* load_published(const std::string& entry, const Plan& plan, bool* exists, std::string* problem) {
  struct stat st {};
  *exists = ::stat(entry.c_str(), &st) == 0;
  if (!*exists) return nullptr;
  constexpr int kTries = 3;
  for (int attempt = 1; attempt <= kTries; ++attempt) {
    Manifest m;
    CheckedLibrary library;
    *problem = check_entry(entry, plan, &m, {}, &library);
    if (!problem->empty()) return nullptr;
    std::string error;
    void* h = try_dlopen(library.path(), &error);
    if (h != nullptr && library.still_unchanged()) return h;
    if (h != nullptr) ::dlclose(h);  // what was loaded may not be what was checked
    if (::stat(entry.c_str(), &st) != 0) {
      *exists = false;
      return nullptr;
    }
    if (h != nullptr) continue;
    // Judged again by its bytes, stamp or not (something may have changed it after the check, or
    // below the file system), rather than called intact.
    *problem = check_entry(entry, plan, nullptr, {.trust_stamp = false});
    if (!problem->empty()) return nullptr;
    throw ModuleError(ModuleError::Kind::LoadFailed,
                      fmt::format("module '{}': {} cannot be loaded: {}\n(the cache entry {} is intact and was "
                                  "left in place: check that the libraries it needs can be found, e.g. "
                                  "LD_LIBRARY_PATH; `mate clear-cache` removes it if it is damaged)",
                                  plan.spec.name, library.path(), error, entry));
  }
  throw ModuleError(ModuleError::Kind::CacheError,
                    fmt::format("module '{}': {}/module.so changed between its check and its dlopen {} times in a "
                                "row: something keeps writing the cache entry",
                                plan.spec.name, entry, kTries));
}

// Removes entries set aside earlier for this key. Nothing loads a set-aside entry (a process
// that mapped its library keeps the mapping), so only the newest is kept, for inspection.
void remove_set_aside(const std::string& module_path, const std::string& key) {
  std::string prefix = ".corrupt-" + key + "-";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(module_path, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(prefix, 0) == 0) remove_tree(it->path().string());
}

// Renames a corrupt entry out of the way. False when the entry vanished meanwhile (the cache
// was cleared): the caller retries.
bool set_aside(const std::string& module_path, const std::string& entry, const Plan& plan,
               const std::string& problem) {
  static std::atomic<unsigned> counter{0};
  std::string aside = fmt::format("{}/.corrupt-{}-{}-{}", module_path, plan.key, getpid(), counter++);
  if (::rename(entry.c_str(), aside.c_str()) != 0) {
    if (errno == ENOENT) return false;
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("module '{}': cache entry {} is unusable ({}) and cannot be set "
                                  "aside: {}",
                                  plan.spec.name, entry, problem, std::strerror(errno)));
  }
  std::fprintf(stderr, "mate: module '%s': cache entry %s is unusable (%s); set aside as %s, rebuilding\n",
               plan.spec.name.c_str(), entry.c_str(), problem.c_str(), aside.c_str());
  return true;
}

std::string arch_text(const Plan& plan) {
  if (!plan.arch_known) return "unknown (no arch list, see the key)";
  std::string list = fmt::format("{}", fmt::join(plan.arch_list, " "));
  return plan.spec.toolchain == Toolchain::Host ? plan.arch : fmt::format("{} ({})", plan.arch, list);
}

// MATE_DISABLE_JIT=1 and no AOT module matched: the module, its key (or why it has none), the
// arch, and every place searched with why it did not match.
ModuleError missing_error(const Plan& plan, const std::vector<std::string>& searched) {
  std::string key = plan.arch_known
                        ? plan.key + (plan.compiler_known ? "" : " (compiler not installed here)")
                        : "none: a key needs the arch list, and " + plan.why_not_buildable;
  std::string text = fmt::format(
      "module '{}' is missing: MATE_DISABLE_JIT=1 requires a matching AOT module and none was "
      "found\n  module: {} ({})\n  key: {}\n  arch: {}\n  searched:\n",
      plan.spec.name, plan.spec.name, to_string(plan.spec.toolchain), key, arch_text(plan));
  for (const auto& s : searched) text += "    " + s + "\n";
  text += "  Build AOT modules with `mate aot-build --out DIR` (DIR added with "
          "mate::jit::add_aot_directory or installed under " MATE_INSTALL_PREFIX "/" MATE_INSTALL_LIBDIR
          "/mate/aot), or unset MATE_DISABLE_JIT.";
  return ModuleError(ModuleError::Kind::Missing, text);
}

// The JIT path, run with the module's lock. Returns the state, or nullptr when the cache was
// cleared under the build (the caller retries once).
std::shared_ptr<const Module::State> build_locked(const Plan& plan, const std::string& root,
                                                  const LoadOptions& options) {
  std::string mod_dir = module_dir(root, plan);
  std::string entry = entry_dir(root, plan);
  // Every "the cache vanished" failure below returns nullptr: `mate clear-cache` renamed the
  // cache away while this process was between two steps, and the caller starts over.
  make_directories(mod_dir);
  core::FileLock::Options lock_options;
  lock_options.notify_after = options.lock_notice_after;
  lock_options.on_wait = [&](const core::LockHolder& holder, std::chrono::milliseconds waited) {
    std::string notice = fmt::format(
        "mate: waiting {:.1f} s for module '{}' (key {}): being built by {} (lock {})",
        waited.count() / 1000.0, plan.spec.name, plan.key, holder.describe(), mod_dir + "/.lock-" + plan.key);
    if (options.on_lock_wait) options.on_lock_wait(notice);
    else std::fprintf(stderr, "%s\n", notice.c_str());
  };
  std::optional<core::FileLock> lock = [&] {
    try {
      return std::optional<core::FileLock>(core::FileLock::acquire(mod_dir + "/.lock-" + plan.key, lock_options));
    } catch (const std::system_error& e) {
      if (e.code() == std::errc::no_such_file_or_directory) return std::optional<core::FileLock>();
      throw ModuleError(ModuleError::Kind::CacheError, fmt::format("module '{}': {}", plan.spec.name, e.what()));
    }
  }();
  if (!lock) return nullptr;  // the directory was removed between its creation and the lock

  // Someone may have published while we waited.
  bool exists = false;
  std::string problem;
  if (void* h = load_published(entry, plan, &exists, &problem))
    return make_state(plan, plan.key, entry + "/module.so", Origin::JitCache, h);
  remove_set_aside(mod_dir, plan.key);
  if (exists && !set_aside(mod_dir, entry, plan, problem)) return nullptr;

  remove_dead_staging(mod_dir, plan.key);
  std::string staging;
  try {
    staging = build_in_staging(plan, mod_dir, BuildStamp::Write);
  } catch (const CacheVanished&) {
    return nullptr;
  }
  auto gone = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) != 0;
  };
  switch (publish(staging, entry)) {
    case Publish::Published: {
      std::string error;
      void* h = try_dlopen(entry + "/module.so", &error);
      if (h == nullptr && gone(entry)) return nullptr;
      if (h == nullptr)
        throw ModuleError(ModuleError::Kind::LoadFailed,
                          fmt::format("module '{}' was built but cannot be loaded from {}: {}",
                                      plan.spec.name, entry, error));
      return make_state(plan, plan.key, entry + "/module.so", Origin::JitBuilt, h);
    }
    case Publish::AlreadyThere: {
      // Lost a race (possible only when the lock file was replaced, e.g. by clear-cache):
      // load our own build, then discard it; the mapping outlives the files.
      std::string error;
      void* h = try_dlopen(staging + "/module.so", &error);
      if (h == nullptr && gone(staging)) return nullptr;
      remove_tree(staging);
      if (h == nullptr)
        throw ModuleError(ModuleError::Kind::LoadFailed,
                          fmt::format("module '{}' was built but cannot be loaded: {}", plan.spec.name, error));
      return make_state(plan, plan.key, entry + "/module.so", Origin::JitBuilt, h);
    }
    case Publish::ParentGone:
      return nullptr;
  }
  return nullptr;
}

}  // namespace

Module load_module(const ModuleSpec& spec, const LoadOptions& options) {
  const std::string root = cache_root();
  Plan plan = make_plan(spec, root + "/toolchains");
  const bool jit_disabled = config::disable_jit();
  std::vector<std::string> roots = aot_directories();
  std::string memo_key = fmt::format("{}\n{}\n{}\n{}\n{}", root, fmt::join(roots, "\n"), jit_disabled,
                                     spec.name, plan.key);
  if (plan.arch_known) {
    std::lock_guard<std::mutex> lock(memo_mutex());
    auto it = memo().find(memo_key);
    if (it != memo().end()) return Module(it->second);
  }
  auto remember = [&](std::shared_ptr<const Module::State> state) {
    std::lock_guard<std::mutex> lock(memo_mutex());
    memo().emplace(memo_key, state);
    return Module(std::move(state));
  };

  std::vector<std::string> searched;
  if (!plan.arch_known) {
    if (jit_disabled) {
      find_aot(plan, &searched);  // matches nothing without an arch list; says what each root holds
      throw missing_error(plan, searched);
    }
    throw ModuleError(ModuleError::Kind::NotBuildable,
                      fmt::format("module '{}' ({}) cannot be resolved: {}", spec.name, to_string(spec.toolchain),
                                  plan.why_not_buildable));
  }

  // An AOT module that matches but cannot be loaded gives way to the next match, then the JIT.
  void* aot_handle = nullptr;
  auto load_aot = [&](const AotMatch&, CheckedLibrary& library, std::string* why) {
    aot_handle = try_dlopen(library.path(), why);
    if (aot_handle == nullptr) {
      *why = "cannot be loaded: " + *why;
      return false;
    }
    if (!library.still_unchanged()) {  // what was loaded may not be what was checked
      ::dlclose(aot_handle);
      aot_handle = nullptr;
      *why = "changed between its check and its dlopen";
      return false;
    }
    return true;
  };
  std::vector<std::string> damaged;
  auto aot = find_aot(plan, &searched, load_aot, &damaged);
  // A damaged AOT module is never loaded: one line each, then the next match or the JIT.
  const char* instead = aot            ? "a later AOT module is"
                        : jit_disabled ? "MATE_DISABLE_JIT=1: no JIT fallback"
                                       : "the JIT cache is used instead";
  for (const auto& d : damaged)
    std::fprintf(stderr, "mate: module '%s': AOT module %s; left in place and not used (%s)\n", spec.name.c_str(),
                 d.c_str(), instead);
  if (aot)
    return remember(make_state(plan, aot->manifest.key, aot->dir + "/" + aot->manifest.library, Origin::Aot, aot_handle));

  const std::string entry = entry_dir(root, plan);
  if (jit_disabled) throw missing_error(plan, searched);
  if (!plan.buildable)
    throw ModuleError(ModuleError::Kind::NotBuildable,
                      fmt::format("module '{}' is not buildable here: {}", spec.name, plan.why_not_buildable));

  // Warm hit: a stat, the manifest, the library checked (its stamp, or its hash) and a dlopen;
  // no lock, no subprocess.
  bool exists = false;
  std::string problem;
  if (void* h = load_published(entry, plan, &exists, &problem))
    return remember(make_state(plan, plan.key, entry + "/module.so", Origin::JitCache, h));

  constexpr int kAttempts = 3;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    if (auto state = build_locked(plan, root, options)) return remember(std::move(state));
    if (attempt < kAttempts)
      std::fprintf(stderr, "mate: module '%s': the cache %s was removed during the build; building again\n",
                   spec.name.c_str(), root.c_str());
  }
  throw ModuleError(ModuleError::Kind::CacheError,
                    fmt::format("module '{}': the cache {} was removed during each of {} builds; try again",
                                spec.name, root, kAttempts));
}

}  // namespace mate::jit
