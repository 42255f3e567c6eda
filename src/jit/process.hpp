// Starting the build tools: posix_spawn with this process's environment, output captured or
// streamed, and program lookup on PATH (read through the registry).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mate::jit::detail {

struct ProcessResult {
  int exit_code = -1;   // valid when the child exited
  int term_signal = 0;  // non-zero when a signal ended it
  std::string output;   // stdout and stderr interleaved (empty when streamed)
  bool ok() const { return term_signal == 0 && exit_code == 0; }
  std::string describe_status() const;  // "exit status 1" / "killed by signal 9"
};

// Runs argv (argv[0] a path). With `stream_to_stderr`, the child's stdout and stderr go to this
// process's stderr; otherwise they are captured into `output`. The child's NVCC_* variables are
// the registry's values (an in-process override reaches nvcc as it reaches the key). Throws
// std::system_error when the child cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, bool stream_to_stderr);

// An absolute path: `name` when it contains a '/' and is executable, else the first executable
// PATH entry/name. Never relative: builds run in another directory, and `./x/c++` and `x/c++`
// must be one compiler (one key). Symlinks are kept (ccache behaves by the name it is run as).
std::optional<std::string> find_program(const std::string& name);

// Why `path` cannot be run as a program: "does not exist", "is a directory", "is not
// executable"; "" when it can.
std::string program_problem(const std::string& path);

}  // namespace mate::jit::detail
