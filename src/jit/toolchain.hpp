// Which compiler builds a toolchain's modules, what it says it is, and for which archs (a
// device toolchain's compiler, variables and arch flags are its vendor row's,
// mate/device/vendors.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "jit/plan.hpp"

namespace mate::jit::detail {

struct ToolchainResolution {
  std::vector<std::string> arch_list;   // empty when unknown
  std::string arch_dir;                 // cache path component
  std::vector<std::string> arch_flags;  // compiler flags selecting the archs
  std::optional<Compiler> compiler;     // nullopt when not found
  std::vector<std::string> compiler_args;  // right after the compiler: nvcc's -ccbin CXX
  std::string host_compiler;  // a separate host compiler's identity (nvcc's); else ""
  std::string problem;                  // why modules of this toolchain cannot be built here
};

// Resolves the compiler (CXX / the vendor row's compiler_variable, then PATH, then the row's
// compiler_fallback) and the arch list (host arch; the row's MATE_*_ARCH_LIST; the registered
// device detector), and a separate host compiler where the row has one (nvcc's). Never throws for a missing compiler or arch: `problem` says what is
// missing and how to fix it.
ToolchainResolution resolve_toolchain(Toolchain toolchain, const std::string& memo_dir);

// The compiler's `--version` output, remembered in `memo_dir` (when not "") under a name
// derived from the invoked path and the executable's resolved path, inode, size and change
// times: a compiler replaced in place is asked again, and two names of one executable (ccache's
// g++ and clang++) are asked separately. The identity in the key is the output itself.
std::string compiler_version(const std::string& invoked, const std::string& resolved,
                             const std::string& memo_dir);

// The arch list in effect for a device toolchain, or nullopt with `why` filled in. Sorted by
// version and without duplicates whatever its source: "9.0 8.0 9.0" and "8.0 9.0" are one list
// (one cache directory, one key, one -gencode each).
std::optional<std::vector<std::string>> device_arch_list(Toolchain toolchain, std::string* why);
std::vector<std::string> normalize_arch_list(std::vector<std::string> list);

}  // namespace mate::jit::detail
