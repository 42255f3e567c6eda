// AOT module roots: reading their manifests and matching a plan against them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "jit/cache.hpp"
#include "jit/plan.hpp"

namespace mate::jit::detail {

struct AotMatch {
  std::string root;
  std::string dir;      // the module's directory (holds module.so and manifest.json)
  Manifest manifest;
};

// Looks for `plan` in every AOT root. `searched` gets one line per root: where it looked and,
// when it did not match, why. The AOT module matches when every key input is equal except the
// compiler's location (and its version when no compiler is installed here), and every arch of
// the plan is in the module's arch list.
std::optional<AotMatch> find_aot(const Plan& plan, std::vector<std::string>* searched);

// The first reason `m` does not match `plan`, or "" when it matches.
std::string aot_mismatch(const Plan& plan, const Manifest& m);

// Writes <root>/manifest.json from the module manifests found under <root>.
void write_aot_index(const std::string& root);

}  // namespace mate::jit::detail
