// `mate version`: what this build is and what it can drive.
#include <fmt/format.h>

#include "build_info.hpp"
#include "commands.hpp"
#include "mate/device/driver.hpp"
#include "mate/tensor/stats.hpp"

namespace mate::cli {

namespace {

void add_version_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("version", "Print version, build type, compiler and device backends");
  cmd->callback([&exit_code] {
    fmt::print("mate {}\n", build_info::kVersion);
    fmt::print("build type: {}\n", build_info::kBuildType);
    fmt::print("compiler: {}\n", build_info::kCompiler);
    if (*build_info::kSanitizers) fmt::print("sanitizers: {}\n", build_info::kSanitizers);
    fmt::print("device backends: {}\n", device::device_backends_summary());
    // Which build of the level-5 statistics kernels this CPU runs (they give the same results;
    // their speed differs: bench/README.md).
    fmt::print("statistics kernels: {}\n", tensor::stats_kernels_name(tensor::stats_kernels_in_use()));
    exit_code = kExitOk;
  });
}

}  // namespace

MATE_CLI_COMMAND(99, add_version_command);

}  // namespace mate::cli
