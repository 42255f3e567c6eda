#include "mate/jit/admin.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>

#include <fmt/format.h>

#include "jit/aot.hpp"
#include "jit/build.hpp"
#include "jit/cache.hpp"
#include "jit/toolchain.hpp"
#include "mate/config.hpp"

namespace mate::jit {

using namespace detail;
namespace fs = std::filesystem;

std::string_view to_string(ModuleState s) {
  switch (s) {
    case ModuleState::Aot: return "aot";
    case ModuleState::JitCached: return "jit-cached";
    case ModuleState::Missing: return "missing";
    case ModuleState::Stale: return "stale";
    case ModuleState::NotBuildable: return "not-buildable";
  }
  return "?";
}

namespace {

std::string shorten(const std::string& v) {
  std::string one = v.substr(0, v.find('\n'));
  if (one.size() > 60) one = one.substr(0, 57) + "...";
  if (one.size() < v.size() && v.find('\n') != std::string::npos) one += " ...";
  return one.empty() ? "(empty)" : one;
}

// The first input of `now` that differs from `before`, as a sentence.
std::string first_difference(const std::vector<KeyInput>& now, const std::vector<KeyInput>& before) {
  for (const auto& i : now) {
    auto it = std::find_if(before.begin(), before.end(), [&](const KeyInput& b) { return b.name == i.name; });
    if (it == before.end()) return fmt::format("{} is new", i.name);
    if (it->value != i.value)
      return fmt::format("{} differs (cached: {}; now: {})", i.name, shorten(it->value), shorten(i.value));
  }
  for (const auto& b : before) {
    auto it = std::find_if(now.begin(), now.end(), [&](const KeyInput& i) { return b.name == i.name; });
    if (it == now.end()) return fmt::format("{} is gone", b.name);
  }
  return "inputs are equal but the key differs";
}

}  // namespace

ModuleStatus module_status(const ModuleSpec& spec, const std::string& library) {
  ModuleStatus s;
  s.library = library;
  s.name = spec.name;
  s.toolchain = spec.toolchain;
  const std::string root = cache_root();
  Plan plan;
  try {
    plan = make_plan(spec, root + "/toolchains");
  } catch (const ModuleError& e) {
    s.state = ModuleState::NotBuildable;
    s.detail = e.what();
    return s;
  }
  s.key = plan.key;
  s.arch = plan.arch;
  for (const auto& i : plan.inputs) s.inputs.emplace_back(i.name, i.value);
  if (!plan.arch_known) {
    s.state = ModuleState::NotBuildable;
    s.detail = plan.why_not_buildable;
    return s;
  }
  if (auto aot = find_aot(plan, nullptr)) {
    s.state = ModuleState::Aot;
    s.key = aot->manifest.key;
    s.path = aot->dir + "/" + aot->manifest.library;
    s.size = aot->manifest.size;
    s.built_at = aot->manifest.built_at;
    s.build_seconds = aot->manifest.build_seconds;
    return s;
  }
  if (!plan.buildable) {
    s.state = ModuleState::NotBuildable;
    s.detail = plan.why_not_buildable;
    return s;
  }
  std::string entry = entry_dir(root, plan);
  s.path = entry + "/module.so";
  Manifest m;
  struct stat st {};
  if (::stat(entry.c_str(), &st) == 0) {
    std::string problem = check_entry(entry, plan, &m);
    if (problem.empty()) {
      s.state = ModuleState::JitCached;
      s.size = m.size;
      s.built_at = m.built_at;
      s.build_seconds = m.build_seconds;
    } else {
      s.state = ModuleState::Stale;
      s.detail = "the cache entry is unusable (" + problem + "); the next load sets it aside and rebuilds";
    }
    return s;
  }
  // No entry for this key: the newest entry of the same module says what changed.
  std::optional<Manifest> newest;
  std::error_code ec;
  for (fs::directory_iterator it(module_dir(root, plan), ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || !it->is_directory()) continue;
    if (auto other = read_manifest(it->path().string(), nullptr))
      if (!newest || other->built_at > newest->built_at) newest = std::move(other);
  }
  if (newest) {
    s.state = ModuleState::Stale;
    s.detail = fmt::format("cached key {}: {}", newest->key, first_difference(plan.inputs, newest->inputs));
  } else {
    s.state = ModuleState::Missing;
  }
  return s;
}

CacheSummary cache_summary() {
  CacheSummary c;
  c.cache_root = cache_root();
  c.cache_bytes = directory_size(c.cache_root);
  c.host_arch = host_arch();
  auto archs = [](Toolchain t) {
    std::string why;
    auto list = device_arch_list(t, &why);
    return list ? fmt::format("{}", fmt::join(*list, " ")) : why;
  };
  c.cuda_archs = archs(Toolchain::Cuda);
  c.musa_archs = archs(Toolchain::Musa);
  c.jit_enabled = !config::disable_jit();
  c.aot_directories = aot_directories();
  return c;
}

ClearResult clear_cache(bool all_versions) {
  ClearResult r;
  r.path = all_versions ? workspace_base() + "/.cache/mate" : cache_root();
  struct stat st {};
  if (::stat(r.path.c_str(), &st) != 0) return r;
  r.existed = true;
  r.bytes = directory_size(r.path);
  // Rename first: processes see the whole cache or none of it, never a half-deleted entry.
  static std::atomic<unsigned> counter{0};
  std::string parent = fs::path(r.path).parent_path().string();
  std::string trash = fmt::format("{}/.mate-trash-{}-{}", parent, getpid(), counter++);
  if (::rename(r.path.c_str(), trash.c_str()) != 0)
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("cannot remove {}: {}", r.path, std::strerror(errno)));
  remove_tree(trash);
  return r;
}

std::vector<AotResult> build_aot(const std::vector<ModuleSpec>& specs, const std::string& out_dir) {
  make_directories(out_dir);
  std::string root = fs::absolute(out_dir).lexically_normal().string();
  std::vector<AotResult> results;
  for (const auto& spec : specs) {
    AotResult r;
    r.name = spec.name;
    Plan plan = make_plan(spec, "");
    r.key = plan.key;
    if (!plan.arch_known || !plan.buildable) {
      r.skipped_reason = plan.why_not_buildable;
      results.push_back(std::move(r));
      continue;
    }
    std::string parent = root + "/" + plan.arch + "/" + spec.name;
    make_directories(parent);
    std::string final_dir = parent + "/" + plan.key;
    std::string staging;
    try {
      staging = build_in_staging(plan, parent);
    } catch (const CacheVanished& e) {
      throw ModuleError(ModuleError::Kind::CacheError,
                        fmt::format("AOT build into {}: {}", root, e.what()));
    }
    remove_tree(final_dir);
    // Older builds of the same module are replaced: one AOT module per name and arch.
    std::error_code ec;
    for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().string() != staging) remove_tree(it->path().string());
    if (publish(staging, final_dir) != Publish::Published)
      throw ModuleError(ModuleError::Kind::CacheError, fmt::format("cannot publish AOT module {}", final_dir));
    r.built = true;
    r.path = final_dir + "/module.so";
    results.push_back(std::move(r));
  }
  write_aot_index(root);
  return results;
}

}  // namespace mate::jit
