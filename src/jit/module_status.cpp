// The state of each module as `mate module-status` shows it (AOT, cached, missing, stale,
// corrupt, not buildable) and the cache summary (size, arch lists, AOT roots).
#include "mate/jit/module_status.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "jit/aot.hpp"
#include "jit/build.hpp"
#include "jit/cache.hpp"
#include "jit/toolchain.hpp"
#include "mate/config.hpp"
#include "mate/device/vendors.hpp"

namespace mate::jit {

using namespace detail;
namespace fs = std::filesystem;

std::string_view to_string(ModuleState s) {
  switch (s) {
    case ModuleState::Aot: return "aot";
    case ModuleState::JitCached: return "jit-cached";
    case ModuleState::Missing: return "missing";
    case ModuleState::Stale: return "stale";
    case ModuleState::Corrupt: return "corrupt";
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

// The newest entry in `module_dir` built by `toolchain`, if any.
std::optional<Manifest> newest_entry(const std::string& module_dir, const std::string& toolchain) {
  std::optional<Manifest> newest;
  std::error_code ec;
  for (fs::directory_iterator it(module_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || !it->is_directory()) continue;
    if (auto other = read_manifest(it->path().string(), nullptr))
      if (other->toolchain == toolchain && (!newest || other->built_at > newest->built_at)) newest = std::move(other);
  }
  return newest;
}

// No entry for this key: the newest entry of the same module says what changed. One built for
// this arch list first; else one built for another (the arch list is part of the directory, so
// a changed MATE_CUDA_ARCH_LIST shows as "target_arch differs", not as missing).
std::optional<Manifest> newest_other_entry(const std::string& root, const Plan& plan) {
  const std::string toolchain(to_string(plan.spec.toolchain));
  if (auto same_arch = newest_entry(module_dir(root, plan), toolchain)) return same_arch;
  std::optional<Manifest> newest;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::string arch = it->path().filename().string();
    if (arch == plan.arch || arch == "toolchains" || arch == "aot-verified" || arch.empty() || arch[0] == '.')
      continue;
    if (auto other = newest_entry(it->path().string() + "/cached_ops/" + plan.spec.name, toolchain))
      if (!newest || other->built_at > newest->built_at) newest = std::move(other);
  }
  return newest;
}

}  // namespace

ModuleStatus module_status(const ModuleSpec& spec, const std::string& library, const StatusOptions& options) {
  ModuleStatus s;
  s.library = library;
  s.name = spec.name;
  s.toolchain = spec.toolchain;
  const std::string root = cache_root();
  Plan plan;
  try {
    // A status query creates nothing: the compiler-version memo is kept only in a cache that exists.
    std::error_code ec;
    plan = make_plan(spec, fs::is_directory(root, ec) ? root + "/toolchains" : "");
  } catch (const ModuleError& e) {
    s.state = ModuleState::NotBuildable;
    s.detail = e.what();
    return s;
  }
  s.key = plan.key;
  s.arch = plan.arch;
  for (const auto& i : plan.inputs) s.inputs.emplace_back(i.name, i.value);
  // What the loader would do: with MATE_DISABLE_JIT=1 it never looks at the JIT cache.
  const bool jit_disabled = config::disable_jit();
  if (!plan.arch_known) {
    s.state = jit_disabled ? ModuleState::Missing : ModuleState::NotBuildable;
    s.detail = jit_disabled ? "MATE_DISABLE_JIT=1 and no AOT module can match without an arch list: " +
                                  plan.why_not_buildable
                            : plan.why_not_buildable;
    return s;
  }
  // A status query writes no stamp; with --verify it trusts none either.
  const CheckOptions check{.trust_stamp = !options.verify, .write_stamp = false};
  std::vector<std::string> damaged_aot;
  // A damaged AOT module is passed over as the loader does; the note says why it is not used.
  auto with_damaged_aot = [&]() -> ModuleStatus& {
    for (const auto& d : damaged_aot)
      s.detail += (s.detail.empty() ? "" : "; ") + fmt::format("AOT module {} (not used)", d);
    return s;
  };
  if (auto aot = find_aot(plan, nullptr, nullptr, &damaged_aot, check)) {
    s.state = ModuleState::Aot;
    s.key = aot->manifest.key;
    s.path = aot->dir + "/" + aot->manifest.library;
    s.size = aot->manifest.size;
    s.built_at = aot->manifest.built_at;
    s.build_seconds = aot->manifest.build_seconds;
    return s;
  }
  std::string entry = entry_dir(root, plan);
  struct stat st {};
  if (jit_disabled) {
    s.state = ModuleState::Missing;
    s.detail = "MATE_DISABLE_JIT=1 and no matching AOT module: a load fails";
    if (::stat(entry.c_str(), &st) == 0) s.detail += " (the JIT cache entry " + entry + " is not used while JIT is disabled)";
    return with_damaged_aot();
  }
  if (!plan.buildable) {
    s.state = ModuleState::NotBuildable;
    s.detail = plan.why_not_buildable;
    return with_damaged_aot();
  }
  s.path = entry + "/module.so";
  Manifest m;
  if (::stat(entry.c_str(), &st) == 0) {
    std::string problem = check_entry(entry, plan, &m, check);
    if (problem.empty()) {
      s.state = ModuleState::JitCached;
      s.size = m.size;
      s.built_at = m.built_at;
      s.build_seconds = m.build_seconds;
    } else {
      s.state = ModuleState::Corrupt;
      s.detail = "the cache entry is damaged (" + problem + "); the next load sets it aside as " +
                 module_dir(root, plan) + "/.corrupt-" + plan.key + "-<pid>-<n> and rebuilds it";
    }
    return with_damaged_aot();
  }
  std::optional<Manifest> newest = newest_other_entry(root, plan);
  if (newest) {
    s.state = ModuleState::Stale;
    s.detail = fmt::format("cached key {}: {}", newest->key, first_difference(plan.inputs, newest->inputs));
  } else {
    s.state = ModuleState::Missing;
  }
  return with_damaged_aot();
}

CacheSummary cache_summary() {
  CacheSummary c;
  c.cache_root = cache_root();
  c.cache_bytes = directory_size(c.cache_root);
  // The cache or the nearest of its parents that exists must be a directory (a file there, e.g.
  // MATE_WORKSPACE_BASE naming one, makes every JIT build fail).
  std::error_code ec;
  fs::path p = c.cache_root;
  while (!p.empty() && p != p.parent_path() && !fs::exists(p, ec)) p = p.parent_path();
  if (fs::exists(p, ec) && !fs::is_directory(p, ec))
    c.cache_problem = p.string() + " is not a directory: JIT builds cannot write the cache";
  c.host_arch = host_arch();
  auto archs = [](Toolchain t) {
    std::string why;
    auto list = device_arch_list(t, &why);
    return list ? fmt::format("{}", fmt::join(*list, " ")) : why;
  };
  for (const device::Vendor& v : device::vendors())
    c.device_archs.push_back({v.kind, archs(static_cast<Toolchain>(device::kind_index(v.kind)))});
  c.jit_enabled = !config::disable_jit();
  c.aot_directories = aot_directories();
  return c;
}

}  // namespace mate::jit
