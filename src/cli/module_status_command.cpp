// `mate module-status`: every known module with its state for the arch list in effect, and a
// summary of the cache. Works offline (MATE_MUSA_ARCH_LIST=3.1 mate module-status).
#include <fmt/format.h>

#include <cctype>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "json_text.hpp"
#include "mate/device/vendors.hpp"
#include "mate/jit/module_status.hpp"
#include "mate/jit/catalog.hpp"

namespace mate::cli {

namespace {

std::string human_bytes(std::uint64_t b) {
  if (b >= (1u << 20)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  if (b >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", b);
}

bool matches_filter(const jit::ModuleStatus& s, const std::string& filter) {
  using jit::ModuleState;
  if (filter.empty()) return true;
  if (filter == "aot") return s.state == ModuleState::Aot;
  if (filter == "jit") return s.state == ModuleState::JitCached;
  if (filter == "missing") return s.state == ModuleState::Missing || s.state == ModuleState::NotBuildable;
  if (filter == "stale") return s.state == ModuleState::Stale;
  if (filter == "corrupt") return s.state == ModuleState::Corrupt;
  return false;
}

nlohmann::json to_json(const jit::ModuleStatus& s, bool detailed) {
  nlohmann::json j = {{"library", s.library}, {"name", s.name},
                      {"toolchain", std::string(jit::to_string(s.toolchain))},
                      {"status", std::string(jit::to_string(s.state))},
                      {"key", s.key}, {"arch", s.arch}, {"path", s.path}, {"size", s.size},
                      {"built_at", s.built_at}, {"build_seconds", s.build_seconds}, {"detail", s.detail}};
  if (detailed) {
    nlohmann::json inputs = nlohmann::json::array();
    for (const auto& [k, v] : s.inputs) inputs.push_back({{"name", k}, {"value", v}});
    j["inputs"] = inputs;
  }
  return j;
}

void add_module_status_command(CLI::App& app, int& exit_code) {
  struct Flags {
    bool detailed = false, json = false, verify = false;
    std::string filter;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("module-status", "Show every known JIT/AOT module and the module cache");
  cmd->add_flag("--detailed", flags->detailed, "Also show each module's path, build time and key inputs");
  cmd->add_option("--filter", flags->filter, "Only modules in this state")
      ->check(CLI::IsMember({"aot", "jit", "missing", "stale", "corrupt"}));
  cmd->add_flag("--json", flags->json, "Print as JSON");
  cmd->add_flag("--verify", flags->verify,
                "Hash every module's library, even one whose verified stamp says it is unchanged "
                "(finds damage below the file system)");
  cmd->callback([flags, &exit_code] {
    jit::CacheSummary summary = jit::cache_summary();
    std::vector<jit::ModuleStatus> rows;
    for (const auto& entry : jit::known_modules()) {
      auto s = jit::module_status(entry.spec, entry.library, {.verify = flags->verify});
      if (matches_filter(s, flags->filter)) rows.push_back(std::move(s));
    }
    if (flags->json) {
      nlohmann::json modules = nlohmann::json::array();
      for (const auto& s : rows) modules.push_back(to_json(s, flags->detailed));
      nlohmann::json out = {{"summary",
                             {{"cache_root", summary.cache_root},
                              {"cache_bytes", summary.cache_bytes},
                              {"cache_problem", summary.cache_problem},
                              {"host_arch", summary.host_arch},
                              {"jit_enabled", summary.jit_enabled},
                              {"aot_directories", summary.aot_directories}}},
                            {"modules", modules}};
      for (const auto& d : summary.device_archs)  // "cuda_arch_list", ...
        out["summary"][std::string(device::kind_name(d.kind)) + "_arch_list"] = d.archs;
      std::cout << json_text(out) << "\n";
      exit_code = kExitOk;
      return;
    }
    fmt::print("{:<34} {:<9} {:<14} {:<32} {:>10}  {}\n", "MODULE", "TOOLCHAIN", "STATUS", "KEY", "SIZE", "BUILT / DETAIL");
    for (const auto& s : rows) {
      std::string when = s.built_at.empty() ? "" : fmt::format("{} ({:.2f} s)", s.built_at, s.build_seconds);
      std::string last = s.detail.empty() ? when : s.detail;
      fmt::print("{:<34} {:<9} {:<14} {:<32} {:>10}  {}\n", s.name, jit::to_string(s.toolchain),
                 jit::to_string(s.state), s.key.empty() ? "-" : s.key, s.size ? human_bytes(s.size) : "-", last);
      if (flags->detailed) {
        fmt::print("    library: {}\n    path:    {}\n    arch:    {}\n", s.library, s.path.empty() ? "-" : s.path,
                   s.arch.empty() ? "-" : s.arch);
        if (!when.empty() && !s.detail.empty()) fmt::print("    built:   {}\n", when);
        for (const auto& [k, v] : s.inputs) {
          std::string one = v.substr(0, v.find('\n'));
          fmt::print("    input {}: {}{}\n", k, one, one.size() < v.size() ? " ..." : "");
        }
      }
    }
    if (rows.empty()) fmt::print("(no module matches)\n");
    fmt::print("\ncache: {} ({})\n", summary.cache_root, human_bytes(summary.cache_bytes));
    if (!summary.cache_problem.empty()) fmt::print("       unusable: {}\n", summary.cache_problem);
    // An arch list starts with a digit; anything else is the reason there is none.
    auto archs = [](const std::string& v) { return !v.empty() && std::isdigit(static_cast<unsigned char>(v[0])) ? v : "none: " + v; };
    fmt::print("arch: host {}\n", summary.host_arch);
    for (const auto& d : summary.device_archs) fmt::print("      {} {}\n", device::kind_title(d.kind), archs(d.archs));
    fmt::print("JIT: {}\n", summary.jit_enabled ? "enabled" : "disabled (MATE_DISABLE_JIT=1: AOT modules only)");
    fmt::print("AOT directories: {}\n", fmt::join(summary.aot_directories, ", "));
    exit_code = kExitOk;
  });
}

}  // namespace

MATE_CLI_COMMAND(40, add_module_status_command);

}  // namespace mate::cli
