// Runs a program as a child process and captures what it printed: tests use it to check the
// `mate` program's exit codes and messages, and crash reports, the way a user sees them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mate::testing {

struct RunResult {
  int exit_code = -1;   // valid when the child exited
  int term_signal = 0;  // non-zero when a signal ended the child
  std::string out;
  std::string err;
};

struct RunOptions {
  // Variables to set in the child. The child starts from this process's environment with
  // every MATE_* variable removed, so a developer's shell cannot change a test's outcome, and
  // without the guard's preload library in LD_PRELOAD (the suite's guard mode guards the test
  // process only, as the seed's pytest plugin does).
  std::map<std::string, std::string> env;
  std::optional<std::string> stdin_text;
  std::optional<std::string> cwd;
};

RunResult run(const std::vector<std::string>& argv, const RunOptions& options = {});

}  // namespace mate::testing
