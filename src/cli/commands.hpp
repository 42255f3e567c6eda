// The `mate` program's subcommands. Each file in src/cli adds one subcommand to the app; the
// work itself lives in the component the subcommand belongs to.
//
// Exit codes: 0 success, 1 the checked thing failed, 2 usage or configuration error.
#pragma once

#include <CLI/CLI.hpp>

namespace mate::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// Each adder registers one subcommand; its callback stores the exit status in `exit_code`.
void add_env_command(CLI::App& app, int& exit_code);
void add_version_command(CLI::App& app, int& exit_code);

}  // namespace mate::cli
