// What `mate env` shows: the variables visible in the environment and the full reference, as
// text, JSON or Markdown. Lives in the config component because it is generated from the
// registry; src/cli only wires it to the command line.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mate/config.hpp"

namespace mate::config {

// One variable as `mate env` reports it.
struct VariableReport {
  const VarInfo* info = nullptr;  // nullptr for an unknown MATE_* variable
  std::string name;
  std::string value;  // the current raw text, or the default when unset
  Source source = Source::Default;
  bool valid = true;
  std::string error;       // why the value is invalid
  std::string suggestion;  // for unknown variables
};

struct EnvReportOptions {
  bool all = false;       // every public variable, not only the visible ones
  bool internal = false;  // with `all`: internal, test-only and external ones too
};

// Set MATE_* variables (known and unknown) and set external ones, or the full list.
std::vector<VariableReport> collect(const EnvReportOptions& options);

std::string render_text(const std::vector<VariableReport>& rows, const EnvReportOptions& options);
nlohmann::json render_json(const std::vector<VariableReport>& rows);
// The reference document (docs/reference/environment.md); independent of the environment.
std::string render_markdown();
// Problems that make `mate env --check` fail, one message per line; empty when all is well.
std::vector<std::string> problems(const std::vector<VariableReport>& rows);

}  // namespace mate::config
