// Points MATE's log at a file in a fresh temporary directory for one test: configure() sets
// MATE_LOGLEVEL, MATE_LOGDEST and MATE_LOGFORMAT as overrides (the environment is left alone) and
// reconfigures the log; restore() drops every override (also those a test added to overrides_,
// e.g. MATE_DUMP_DIR) and reconfigures again. A base of the log tests' fixtures.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mate/config.hpp"
#include "mate/log/api.hpp"
#include "temp_dir.hpp"

namespace mate::testing {

class LogToFile {
 protected:
  explicit LogToFile(const char* dir_name) : dir_(dir_name), path_((dir_ / "api.log").string()) {}

  void configure(int level, const char* format = "text") {
    overrides_.clear();
    overrides_.push_back(std::make_unique<config::ScopedOverride>(config::Var::MATE_LOGLEVEL, std::to_string(level)));
    overrides_.push_back(std::make_unique<config::ScopedOverride>(config::Var::MATE_LOGDEST, path_));
    overrides_.push_back(std::make_unique<config::ScopedOverride>(config::Var::MATE_LOGFORMAT, format));
    log::reconfigure();
  }
  void restore() {
    overrides_.clear();
    log::reconfigure();
  }
  // The log file's text ("" when nothing was written).
  std::string log() const { return read_file(path_); }

  TempDir dir_;
  std::string path_;
  std::vector<std::unique_ptr<config::ScopedOverride>> overrides_;
};

}  // namespace mate::testing
