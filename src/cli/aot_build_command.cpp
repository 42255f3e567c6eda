// `mate aot-build --out DIR`: builds the known modules ahead of time for the arch lists in
// effect, into DIR with a manifest.json (what the build system runs into <build>/aot).
#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "commands.hpp"
#include "mate/core/quiet_write.hpp"
#include "mate/device/vendors.hpp"
#include "mate/jit/aot_build.hpp"
#include "mate/jit/catalog.hpp"

namespace mate::cli {

namespace {

void add_aot_build_command(CLI::App& app, int& exit_code) {
  struct Flags {
    std::string out;
    std::vector<std::string> modules;
    std::vector<std::string> toolchains;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("aot-build", "Build the known modules ahead of time into a directory");
  cmd->add_option("--out", flags->out, "Output directory (an AOT root)")->required();
  cmd->add_option("--module", flags->modules, "Only these modules (repeatable; default: all)");
  std::vector<std::string> toolchains{"host"};  // and one per vendor (mate/device/vendors.hpp)
  for (const device::Vendor& v : device::vendors()) toolchains.push_back(v.name);
  cmd->add_option("--toolchain", flags->toolchains,
                  "Only modules of these toolchains (repeatable; default: all). The build's AOT step "
                  "leaves out cuda/musa when MATE_AOT_CUDA_ARCH_LIST/MATE_AOT_MUSA_ARCH_LIST is empty")
      ->check(CLI::IsMember(toolchains));
  cmd->callback([flags, &exit_code] {
    std::vector<jit::ModuleSpec> specs;
    for (auto& entry : jit::known_modules()) {
      const bool named = flags->modules.empty() || std::find(flags->modules.begin(), flags->modules.end(),
                                                             entry.spec.name) != flags->modules.end();
      const std::string toolchain(jit::to_string(entry.spec.toolchain));
      const bool of_toolchain = flags->toolchains.empty() || std::find(flags->toolchains.begin(),
                                                                       flags->toolchains.end(), toolchain) !=
                                                                 flags->toolchains.end();
      if (named && of_toolchain) specs.push_back(std::move(entry.spec));
    }
    for (const auto& wanted : flags->modules) {
      const auto known = jit::known_modules();
      if (std::none_of(known.begin(), known.end(), [&](const auto& e) { return e.spec.name == wanted; })) {
        fmt::print(stderr, "mate aot-build: unknown module '{}' (see `mate module-status`)\n", wanted);
        exit_code = kExitUsage;
        return;
      }
    }
    if (specs.empty()) {  // the filters leave nothing: nothing to build, no manifest to write
      fmt::print(stderr, "mate aot-build: no module left to build: {} of --toolchain {} "
                         "(`mate module-status` lists each module's toolchain)\n",
                 flags->modules.empty() ? "no known module is"
                                        : fmt::format("none of --module {} is", fmt::join(flags->modules, ", ")),
                 fmt::join(flags->toolchains, ", "));
      exit_code = kExitUsage;
      return;
    }
    // Mode 0755 whatever the umask (std::filesystem would make it 0777 under `umask 000`).
    const int error = core::create_directories(flags->out, 0755);
    if (error != 0 || !std::filesystem::is_directory(flags->out)) {
      fmt::print(stderr, "mate aot-build: --out {}: cannot create the directory: {}\n", flags->out,
                 error != 0 ? std::strerror(error) : "a file of that name is in the way");
      exit_code = kExitUsage;
      return;
    }
    // Skipping what cannot be built here (CUDA modules without nvcc) is normal for a full build;
    // a module asked for by name that was not built, or nothing built at all, is a failure.
    std::size_t built = 0;
    bool named_skipped = false;
    for (const auto& r : jit::build_aot(specs, flags->out)) {
      if (r.built) fmt::print("built   {} key {} -> {}\n", r.name, r.key, r.path);
      else fmt::print("skipped {}: {}\n", r.name, r.skipped_reason);
      built += r.built ? 1 : 0;
      named_skipped = named_skipped || (!r.built && !flags->modules.empty());
    }
    if (named_skipped || (built == 0 && !specs.empty())) {
      fmt::print(stderr, "mate aot-build: {}\n", named_skipped ? "a module asked for with --module was not built"
                                                               : "no module was built");
      exit_code = kExitFailed;
      return;
    }
    exit_code = kExitOk;
  });
}

}  // namespace

MATE_CLI_COMMAND(42, add_aot_build_command);

}  // namespace mate::cli
