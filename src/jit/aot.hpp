// AOT module roots: reading their manifests and matching a plan against them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "jit/cache.hpp"
#include "jit/plan.hpp"
#include "jit/verify.hpp"

namespace mate::jit::detail {

struct AotMatch {
  std::string root;
  std::string dir;      // the module's directory (holds module.so and manifest.json)
  Manifest manifest;
};

// Looks for `plan` in every AOT root, in order. `searched` gets one line per root: where it
// looked and, when it did not match, why. The AOT module matches when every input of the module
// itself is equal (see aot_mismatch), every arch of the plan is in the module's arch list, and
// its library is sound (check_library, with the module's stamp in the JIT cache, aot_stamp).
// `accept` (the loader's dlopen of the checked library, still open) may still refuse a match,
// saying why; the search then goes on through the later modules and roots.
// `damaged` gets one line per matching module whose library fails check_library (missing,
// truncated, not the content hash recorded): "<dir>: <why>", for the warning that the module
// was passed over (an AOT root is an install: it is left as it is, never set aside).
using AotAccept = std::function<bool(const AotMatch&, CheckedLibrary& library, std::string* why)>;
std::optional<AotMatch> find_aot(const Plan& plan, std::vector<std::string>* searched,
                                 const AotAccept& accept = nullptr, std::vector<std::string>* damaged = nullptr,
                                 const CheckOptions& options = {});

// Inputs that say which compiler built a module rather than what the module is: its path,
// invoked name and version, and nvcc's host compiler.
bool is_compiler_identity_input(const std::string& name);

// The first reason `m` does not match `plan`, or "" when it matches. An AOT module is built by
// the packager's compiler, not this machine's: compiler identity inputs are never compared
// (whatever compiler is installed here); the module's sources, parameters, flags, arch and MATE
// version and ABI are.
std::string aot_mismatch(const Plan& plan, const Manifest& m);

// Writes <root>/manifest.json from the module manifests found under <root>.
void write_aot_index(const std::string& root);
// Throws ModuleError (CacheError) when <root>/manifest.json exists and is not an index
// write_aot_index may replace: someone else's file, a corrupt one, or another format.
void check_index_replaceable(const std::string& root);

}  // namespace mate::jit::detail
