// mate/jit/aot_build.hpp — what `mate aot-build` does: build modules ahead of time into an AOT
// root (one directory per arch and module, and the root's manifest.json).
#pragma once

#include <string>
#include <vector>

#include "mate/jit/module.hpp"

namespace mate::jit {

struct AotResult {
  std::string name;
  bool built = false;
  std::string key;
  std::string path;
  std::string skipped_reason;  // when not built
};
// Builds each spec into <out_dir>/<arch>/<name>/<key>/ and writes <out_dir>/manifest.json.
// Specs that are not buildable here are skipped with the reason; a build failure throws.
std::vector<AotResult> build_aot(const std::vector<ModuleSpec>& specs, const std::string& out_dir);

}  // namespace mate::jit
