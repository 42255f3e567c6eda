// `mate aot-build --out DIR`: builds the known modules ahead of time for the arch lists in
// effect, into DIR with a manifest.json (what the build system runs into <build>/aot).
#include <fmt/format.h>

#include "commands.hpp"
#include "mate/jit/admin.hpp"
#include "mate/jit/catalog.hpp"

namespace mate::cli {

namespace {

void add_aot_build_command(CLI::App& app, int& exit_code) {
  struct Flags {
    std::string out;
    std::vector<std::string> modules;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("aot-build", "Build the known modules ahead of time into a directory");
  cmd->add_option("--out", flags->out, "Output directory (an AOT root)")->required();
  cmd->add_option("--module", flags->modules, "Only these modules (repeatable; default: all)");
  cmd->callback([flags, &exit_code] {
    std::vector<jit::ModuleSpec> specs;
    for (auto& entry : jit::known_modules()) {
      if (flags->modules.empty() ||
          std::find(flags->modules.begin(), flags->modules.end(), entry.spec.name) != flags->modules.end())
        specs.push_back(std::move(entry.spec));
    }
    for (const auto& wanted : flags->modules) {
      if (std::none_of(specs.begin(), specs.end(), [&](const jit::ModuleSpec& s) { return s.name == wanted; })) {
        fmt::print(stderr, "mate aot-build: unknown module '{}' (see `mate module-status`)\n", wanted);
        exit_code = kExitUsage;
        return;
      }
    }
    for (const auto& r : jit::build_aot(specs, flags->out)) {
      if (r.built) fmt::print("built   {} key {} -> {}\n", r.name, r.key, r.path);
      else fmt::print("skipped {}: {}\n", r.name, r.skipped_reason);
    }
    exit_code = kExitOk;
  });
}

}  // namespace

MATE_CLI_COMMAND(42, add_aot_build_command);

}  // namespace mate::cli
