#include "jit/aot.hpp"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "mate/config.hpp"
#include "mate/core/atomic_file.hpp"
#include "mate/core/install_location.hpp"
#include "mate/device/vendors.hpp"

namespace mate::jit {

namespace {

std::mutex& roots_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& added_roots() {
  static std::vector<std::string> r;
  return r;
}

}  // namespace

void add_aot_directory(const std::string& dir) {
  std::lock_guard<std::mutex> lock(roots_mutex());
  auto& r = added_roots();
  if (std::find(r.begin(), r.end(), dir) == r.end()) r.push_back(dir);
}

std::vector<std::string> aot_directories() {
  std::vector<std::string> out;
  {
    std::lock_guard<std::mutex> lock(roots_mutex());
    out = added_roots();
  }
  auto add = [&](std::string d) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::weakly_canonical(d, ec);
    if (!ec) d = p.string();
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  };
  // The tree MATE's code was loaded from (libmate.so's, or the program's): its aot/ in a build
  // tree, <libdir>/mate/aot installed.
  if (const std::string tree = core::install_tree(); !tree.empty()) {
    add(tree + "/aot");
    add(tree + "/" MATE_INSTALL_LIBDIR "/mate/aot");
  }
  add(std::string(MATE_INSTALL_PREFIX) + "/" MATE_INSTALL_LIBDIR "/mate/aot");
  return out;
}

}  // namespace mate::jit

namespace mate::jit::detail {

namespace fs = std::filesystem;

bool is_compiler_identity_input(const std::string& name) {
  if (name == kInputCompilerPath || name == kInputCompilerInvoked || name == kInputCompilerVersion ||
      name == kInputHostCompiler)
    return true;
  // The variable choosing a separate host compiler (a vendor row's: NVCC_CCBIN).
  for (const device::Vendor& v : device::vendors())
    if (v.host_compiler_variable && name == config::info(*v.host_compiler_variable).name) return true;
  return false;
}

std::string aot_mismatch(const Plan& plan, const Manifest& m) {
  if (m.name != plan.spec.name) return "different module";
  if (plan.arch_list.empty())
    return fmt::format("built for arch {}, but no arch is in effect here to choose it",
                       fmt::join(m.arch_list, " "));
  for (const auto& a : plan.arch_list)
    if (std::find(m.arch_list.begin(), m.arch_list.end(), a) == m.arch_list.end())
      return fmt::format("built for arch {} which lacks {}", fmt::join(m.arch_list, " "), a);
  std::map<std::string, std::string> theirs;
  for (const auto& i : m.inputs) theirs[i.name] = i.value;
  for (const auto& i : plan.inputs) {
    if (i.name == kInputTargetArch || is_compiler_identity_input(i.name)) continue;
    auto it = theirs.find(i.name);
    if (it == theirs.end()) return fmt::format("input '{}' is absent from the AOT module", i.name);
    if (it->second != i.value) return fmt::format("input '{}' differs", i.name);
  }
  for (const auto& [name, value] : theirs) {
    if (is_compiler_identity_input(name)) continue;
    bool ours = std::any_of(plan.inputs.begin(), plan.inputs.end(), [&](const KeyInput& i) { return i.name == name; });
    if (!ours) return fmt::format("the AOT module has input '{}' that this build does not", name);
  }
  return "";
}

namespace {

struct AotIndex {
  bool present = false;
  std::string problem;
  std::vector<std::pair<std::string, Manifest>> modules;  // dir relative to root, manifest
};

// Roots are read once per process: an AOT install does not change under a running program.
const AotIndex& read_index(const std::string& root) {
  static std::mutex mutex;
  static std::map<std::string, AotIndex> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(root);
  if (it != cache.end()) return it->second;
  AotIndex index;
  std::ifstream in(root + "/manifest.json", std::ios::binary);
  if (!in) {
    index.problem = "no manifest.json";
  } else {
    try {
      nlohmann::json j = nlohmann::json::parse(in);
      index.present = true;
      for (const auto& entry : j.at("modules")) {
        std::string dir = entry.at("dir").get<std::string>();
        std::string why;
        auto m = read_manifest(root + "/" + dir, &why);
        if (m) index.modules.emplace_back(dir, std::move(*m));
      }
    } catch (const std::exception& e) {
      index.present = false;
      index.problem = std::string("unreadable manifest.json: ") + e.what();
    }
  }
  return cache.emplace(root, std::move(index)).first->second;
}

}  // namespace

std::optional<AotMatch> find_aot(const Plan& plan, std::vector<std::string>* searched, const AotAccept& accept,
                                 std::vector<std::string>* damaged, const CheckOptions& options) {
  for (const auto& root : aot_directories()) {
    const AotIndex& index = read_index(root);
    if (!index.present) {
      if (searched) searched->push_back(fmt::format("{} (AOT root: {})", root, index.problem));
      continue;
    }
    std::string reasons;
    for (const auto& [dir, m] : index.modules) {
      if (m.name != plan.spec.name) continue;
      std::string why = aot_mismatch(plan, m);
      if (!why.empty()) {
        reasons += fmt::format("; key {} does not match: {}", m.key, why);
        continue;
      }
      // A damaged module (emptied, truncated, removed) or one that cannot be loaded does not
      // hide a good one in a later root.
      AotMatch match{root, root + "/" + dir, m};
      const std::string library = match.dir + "/" + m.library;
      CheckedLibrary checked;
      why = check_library(library, m, aot_stamp(library), options, &checked);
      if (!why.empty() && damaged) damaged->push_back(match.dir + ": " + why);
      if (why.empty() && (!accept || accept(match, checked, &why))) return match;
      reasons += fmt::format("; key {} matches but is unusable: {}", m.key, why);
    }
    if (searched)
      searched->push_back(fmt::format("{} (AOT root: {}{})", root,
                                      reasons.empty() ? "module not in manifest.json" : "no match", reasons));
  }
  return std::nullopt;
}

void check_index_replaceable(const std::string& root) {
  std::ifstream in(root + "/manifest.json", std::ios::binary);
  if (!in) return;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  std::string why;
  if (j.is_discarded() || !j.is_object() || !j.contains("modules") || !j.contains("format"))
    why = "it is not a MATE AOT index";
  else if (j["format"] != 1)
    why = "it is an AOT index of another format (" + j["format"].dump() + "; this MATE writes 1)";
  if (!why.empty())
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("{}/manifest.json would be replaced, but {}; left as it is (choose another "
                                  "directory, or remove the file)", root, why));
}

void write_aot_index(const std::string& root) {
  nlohmann::json modules = nlohmann::json::array();
  std::error_code ec;
  std::vector<std::string> dirs;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (it->is_directory() && !name.empty() && name[0] == '.') {
      it.disable_recursion_pending();
      continue;
    }
    if (name == "manifest.json" && it->path().parent_path() != fs::path(root))
      dirs.push_back(fs::relative(it->path().parent_path(), root).string());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& d : dirs) {
    std::string why;
    if (auto m = read_manifest(root + "/" + d, &why))
      modules.push_back({{"dir", d}, {"name", m->name}, {"key", m->key}, {"arch_list", m->arch_list}});
  }
  nlohmann::json index = {{"format", 1}, {"mate_version", MATE_VERSION_STRING}, {"modules", modules}};
  std::string step;
  if (auto e = core::write_file_atomically(root + "/manifest.json", index.dump(2) + "\n", 0644, &step))
    throw ModuleError(ModuleError::Kind::CacheError,
                      fmt::format("cannot write {}/manifest.json: {} ({})", root, e.message(), step));
}

}  // namespace mate::jit::detail
