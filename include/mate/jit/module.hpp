// mate/jit/module.hpp — compiled modules for kernel libraries: specified once, built on demand
// (JIT) or ahead of time (AOT), cached by content, loaded with dlopen.
//
// A kernel library says, in a few lines, "this module, from this source template rendered with
// these parameters, built by this toolchain; give me symbol X":
//
//   static const mate::jit::ModuleSpec spec{
//       .name = "gemm_f32_t64",
//       .toolchain = mate::jit::Toolchain::Host,
//       .sources = {{"gemm.cpp", kGemmTemplate}},            // text with {{dtype}}, {{tile}}
//       .params = {{"dtype", "float"}, {"tile", "64"}}};
//   auto* gemm = mate::jit::load_module(spec).function<void(const float*, float*, int)>("gemm");
//
// Contract:
//  * A module's key is a content hash of everything that can change the binary: MATE's version
//    and bundled headers (include/mate/jit/module_abi.h), the rendered sources, the exact
//    command lines (paths relative to the build directory, compiler as a placeholder), the
//    target arch, the compiler (resolved path, path invoked and `--version` output; for CUDA
//    also nvcc's host compiler), the MATE_EXTRA_* flags and nvcc's NVCC_*_FLAGS. Never file
//    modification times.
//  * load_module() prefers a matching AOT module (same inputs except the compiler's identity:
//    AOT modules are built by the packager's compiler; every requested arch in the AOT arch
//    list; a sound, loadable library, else the next match), then the JIT cache under
//    MATE_WORKSPACE_BASE/.cache/mate/<version>/<arch>/cached_ops/<name>/<key>/, then builds.
//    A warm hit starts no subprocess. Concurrent builders of one module serialise on a flock;
//    published cache entries are immutable directories, published by rename.
//  * MATE_DISABLE_JIT=1: AOT only; a missing module is a ModuleError naming the module, its
//    key, the arch and every place searched.
//  * Loaded modules are never unloaded (their code may be referenced anywhere).
//  * Errors are ModuleError with a kind and a message written for the user; never a crash.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "mate/device/backend.hpp"

namespace mate::jit {

// Who compiles a module: the host C++ compiler, or a vendor's device compiler (its row in
// mate/device/vendors.hpp: nvcc, mcc). The device enumerators mirror device::Kind.
enum class Toolchain { Host, Cuda, Musa };
// "host", or the vendor's name ("cuda", "musa").
std::string_view to_string(Toolchain t);
// The kind of memory the toolchain's modules run on (Host for the host toolchain).
device::Kind device_kind(Toolchain t) noexcept;

// One source file of a module: `text` is a template in which {{param}} is replaced by the
// value of `param` (every placeholder must have a value; "{{{{" writes a literal "{{").
struct SourceTemplate {
  std::string filename;  // relative name inside the module, e.g. "gemm.cpp" or "scale.cu"
  std::string text{};
};

struct ModuleSpec {
  std::string name;  // [A-Za-z0-9_.-]+, unique in a kernel library
  Toolchain toolchain = Toolchain::Host;
  std::vector<SourceTemplate> sources{};
  std::map<std::string, std::string> params{};  // rendered into every source
  std::vector<std::string> cflags{};            // compile flags owned by the module
  std::vector<std::string> ldflags{};           // link flags owned by the module
};

// Where a loaded module came from.
enum class Origin { Aot, JitCache, JitBuilt };
std::string_view to_string(Origin o);

class ModuleError : public std::runtime_error {
 public:
  enum class Kind {
    BadSpec,       // the spec itself is wrong (name, template, parameter)
    NotBuildable,  // no compiler, no arch list, JIT impossible here
    Missing,       // MATE_DISABLE_JIT=1 and no matching AOT module
    BuildFailed,   // the compiler failed; what() holds its full output and the failing command
    LoadFailed,    // dlopen or a symbol lookup failed
    CacheError,    // the cache directory cannot be used
  };
  ModuleError(Kind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

class Module {
 public:
  const std::string& name() const noexcept;
  const std::string& key() const noexcept;
  const std::string& path() const noexcept;  // the shared library that was loaded
  Origin origin() const noexcept;
  // The address of `symbol`; throws ModuleError(LoadFailed) naming the module when absent.
  void* symbol(std::string_view symbol) const;
  template <class F>
  F* function(std::string_view symbol_name) const {
    return reinterpret_cast<F*>(symbol(symbol_name));
  }

  struct State;
  explicit Module(std::shared_ptr<const State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<const State> state_;
};

struct LoadOptions {
  // A process waiting on another's build says whom it waits on after this long (stderr).
  std::chrono::milliseconds lock_notice_after{3000};
  // Replaces the stderr notice (tests, embedding applications).
  std::function<void(const std::string& notice)> on_lock_wait;
};

// Resolves, builds if needed, and loads `spec`. Thread-safe; a module loaded once is returned
// from memory afterwards.
Module load_module(const ModuleSpec& spec, const LoadOptions& options = {});

// ---- hooks and search paths ----

// Returns the "major.minor" archs of the visible devices of one kind ({} when none). By default
// the driver backend (mate/device/driver.hpp) is asked; a detector set here replaces it (tests,
// frameworks that know better). With no arch list and no device, device modules are reported
// as not buildable, with the driver's reason.
using DeviceArchDetector = std::vector<std::string> (*)();
void set_device_arch_detector(device::Kind kind, DeviceArchDetector detector);

// AOT roots searched, in order: those added here, then next to the running program
// (<exe dir>/../aot for a build tree, <exe dir>/../<libdir>/mate/aot for an install), then
// <install prefix>/<libdir>/mate/aot, <libdir> being CMake's CMAKE_INSTALL_LIBDIR. Each root holds manifest.json written by build_aot().
void add_aot_directory(const std::string& dir);
std::vector<std::string> aot_directories();

}  // namespace mate::jit
