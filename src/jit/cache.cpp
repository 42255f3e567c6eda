#include "jit/cache.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "jit/verify.hpp"
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

std::string check_entry(const std::string& dir, const Plan& plan, Manifest* out, const CheckOptions& options,
                        CheckedLibrary* library) {
  std::string why;
  auto m = read_manifest(dir, &why);
  if (!m) return why;
  if (m->name != plan.spec.name || m->key != plan.key)
    return fmt::format("manifest.json is for module '{}' key {}, not '{}' key {}", m->name, m->key,
                       plan.spec.name, plan.key);
  if (std::string why = check_library(dir + "/" + m->library, *m, entry_stamp(dir, *m), options, library); !why.empty())
    return why;
  if (out) *out = std::move(*m);
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
