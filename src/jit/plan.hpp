// Turning a ModuleSpec into a build plan: rendered sources, the resolved toolchain and arch
// list, the exact command lines, and the key inputs with the key itself. Pure apart from
// finding the compiler and asking it for its version (memoised, see toolchain.cpp).
#pragma once

#include <string>
#include <vector>

#include "mate/jit/module.hpp"

namespace mate::jit::detail {

// One named input of the key, in a fixed order. A value is short text or a content hash (hash.hpp).
struct KeyInput {
  std::string name;
  std::string value;
  bool operator==(const KeyInput&) const = default;
};

// Input names with a special role in matching AOT modules.
inline constexpr const char* kInputCompilerPath = "compiler_path";
inline constexpr const char* kInputCompilerInvoked = "compiler_invoked";
inline constexpr const char* kInputCompilerVersion = "compiler_version";
inline constexpr const char* kInputTargetArch = "target_arch";
inline constexpr const char* kInputHostCompiler = "host_compiler";
// Placeholder in recorded command lines for the compiler and for the per-arch flags.
inline constexpr const char* kCompilerToken = "<compiler>";
inline constexpr const char* kArchFlagsToken = "<arch-flags>";

struct RenderedFile {
  std::string path;  // relative to the build directory, e.g. "src/gemm.cpp"
  std::string text;
};

struct BuildStep {
  std::string output;               // relative, e.g. "obj/gemm.o" or "module.so"
  std::vector<std::string> inputs;  // relative
  std::vector<std::string> args;    // after the compiler; kArchFlagsToken expands in place
};

struct Compiler {
  std::string invoked;   // the path run (as found: keeps ccache-style symlinks working), part of the key
  std::string resolved;  // realpath, part of the key
  std::string version;   // `--version` output, trimmed
};

struct Plan {
  ModuleSpec spec;
  std::string arch;                    // cache directory component: "x86_64", "cuda_9.0"
  std::vector<std::string> arch_list;  // device archs ("9.0"), or the host arch
  std::vector<std::string> arch_flags;
  bool buildable = true;               // false: `why_not_buildable` says why
  std::string why_not_buildable;
  bool compiler_known = false;         // false: compiler inputs are "unknown" (AOT match only)
  bool arch_known = false;             // false: no arch list, so no key at all
  Compiler compiler;
  std::vector<std::string> compiler_args;  // after the compiler in every command (nvcc's -ccbin)
  std::vector<RenderedFile> files;     // sources and bundled headers
  std::vector<BuildStep> steps;        // compile steps, then the link step (output module.so)
  std::vector<KeyInput> inputs;
  std::string key;                     // 32 hex characters; "" when !arch_known
};

// Validates the spec (throws ModuleError BadSpec) and builds the plan. `memo_dir` is where the
// compiler's `--version` output is remembered across processes ("" = this process only).
Plan make_plan(const ModuleSpec& spec, const std::string& memo_dir);

// "x86_64" etc.
std::string host_arch();
// `text` with every {{name}} replaced; throws ModuleError(BadSpec) on an unknown placeholder.
std::string render_template(const std::string& module, const std::string& filename,
                            const std::string& text, const std::map<std::string, std::string>& params);
// A shell-safe, ninja-safe rendering of one argument.
std::string quote_arg(const std::string& arg);
// The command line as recorded (compiler and arch flags as placeholders).
std::string recorded_command(const BuildStep& step);
// The argv to run for `step`.
std::vector<std::string> expanded_argv(const Plan& plan, const BuildStep& step);
// Splits flag variables on whitespace.
std::vector<std::string> split_flags(const std::string& text);

// Bundled headers (include/mate/jit/*.h shipped inside MATE), as {relative path, text}.
const std::vector<RenderedFile>& bundled_headers();

}  // namespace mate::jit::detail
