// Subcommands that run another program (`mate guard-run [OPTIONS] [--] CMD ARGS...`) take their
// own options up to the program's name: everything after it is the program's, as with `env` or
// `nice`, so `mate guard-run python3 -c ...` passes -c to python3.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace mate::cli {

// The command line after argv[0], with "--" inserted before the program's name when a
// subcommand that has a positional option named "command" is given one without "--". CLI11 has no
// such mode for a subcommand (its prefix_command passes "--" up to the parent app).
std::vector<std::string> with_end_of_options(const CLI::App& app, int argc, char** argv);

}  // namespace mate::cli
