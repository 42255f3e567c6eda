// mate/cli/program.hpp — the `mate` program as a function, for the program's main() and for
// `python -m mate`, which runs the same program in the interpreter's process.
#pragma once

#include <string>
#include <vector>

namespace mate::cli {

// Runs `mate ARGS...` (args excludes the program name) and returns its exit status: 0 success,
// 1 the checked thing failed, 2 usage or configuration error. Prints to stdout and stderr.
int run_program(const std::vector<std::string>& args);

}  // namespace mate::cli
