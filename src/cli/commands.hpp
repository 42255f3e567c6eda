// The `mate` program's subcommands. Each `*_command.cpp` file in src/cli adds one subcommand
// with a MATE_CLI_COMMAND registration; the work itself lives in the component the subcommand
// belongs to, so these files stay thin.
//
// Exit codes: 0 success, 1 the checked thing failed, 2 usage or configuration error.
#pragma once

#include <CLI/CLI.hpp>

namespace mate::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// Adds one subcommand to `app`; its callback stores the exit status in `exit_code`.
using CommandAdder = void (*)(CLI::App& app, int& exit_code);

// Registers an adder at static-initialisation time. `order` sorts `mate --help`.
struct CommandRegistration {
  CommandRegistration(int order, CommandAdder adder);
};

// Adds every registered subcommand to `app`, in `order`.
void add_all_commands(CLI::App& app, int& exit_code);

}  // namespace mate::cli

// Place once in a *_command.cpp file, at namespace scope.
#define MATE_CLI_COMMAND(order, adder) \
  static const ::mate::cli::CommandRegistration mate_cli_registration_##adder(order, adder)
