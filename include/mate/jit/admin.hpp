// mate/jit/admin.hpp — what `mate module-status`, `mate clear-cache` and `mate aot-build` do:
// the state of every known module, cache housekeeping, and AOT builds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mate/jit/module.hpp"

namespace mate::jit {

enum class ModuleState {
  Aot,           // a matching AOT module will be loaded
  JitCached,     // a published JIT cache entry will be loaded
  Missing,       // nothing built yet (a load would build it, or fail with MATE_DISABLE_JIT=1)
  Stale,         // only entries for other inputs exist; `detail` names the first that differs
  NotBuildable,  // no compiler or no arch list here; `detail` says why
};
std::string_view to_string(ModuleState s);

struct ModuleStatus {
  std::string library;
  std::string name;
  Toolchain toolchain = Toolchain::Host;
  ModuleState state = ModuleState::Missing;
  std::string key;    // the key in effect ("" when it cannot be computed)
  std::string arch;   // cache arch component ("x86_64", "cuda_9.0")
  std::string path;   // the library that would be loaded, or the entry that would be created
  std::uint64_t size = 0;
  std::string built_at;
  double build_seconds = 0;
  std::string detail;
  std::vector<std::pair<std::string, std::string>> inputs;  // the key inputs in effect
};

ModuleStatus module_status(const ModuleSpec& spec, const std::string& library = "");

struct CacheSummary {
  std::string cache_root;
  std::uint64_t cache_bytes = 0;
  // Empty, or why JIT builds cannot write the cache ("/x/base is not a directory").
  std::string cache_problem;
  std::string host_arch;
  std::string cuda_archs;  // "9.0 10.0", or why there is none
  std::string musa_archs;
  bool jit_enabled = true;
  std::vector<std::string> aot_directories;
};
CacheSummary cache_summary();

struct ClearResult {
  std::string path;  // what was removed
  bool existed = false;
  std::uint64_t bytes = 0;
  std::vector<std::string> leftovers;  // directories of an earlier clear-cache killed midway
  std::uint64_t leftover_bytes = 0;
};
// Removes the cache of this MATE version (all versions with `all_versions`). Safe while other
// processes use it: the directory is first renamed away atomically (to .mate-trash-<host>-<pid>-
// <n>), so no process sees half a cache; loaded modules stay mapped, and a build in flight
// retries in a fresh cache. Trash directories of dead clear-cache processes on this host are
// removed too (a run killed midway); those of live ones are left to them.
ClearResult clear_cache(bool all_versions);

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
