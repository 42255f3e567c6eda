// mate/jit/module_status.hpp — what `mate module-status` reports: the state of one module (AOT,
// cached, missing, stale, corrupt, not buildable, with the key inputs in effect) and a summary of the
// cache, the arch lists and the AOT roots.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mate/jit/module.hpp"

namespace mate::jit {

enum class ModuleState {
  Aot,           // a matching AOT module will be loaded
  JitCached,     // a published JIT cache entry will be loaded
  Missing,       // nothing built yet (a load would build it, or fail with MATE_DISABLE_JIT=1)
  Stale,         // only entries for other inputs exist; `detail` names the first that differs
  Corrupt,       // the entry for these inputs is damaged (`detail` says how): the next load
                 // sets it aside (.corrupt-<key>-...) and rebuilds it
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

struct StatusOptions {
  // Hash every library, even one whose verified stamp says it has not changed since its bytes
  // last matched (docs/jit.md, "Content hashes"): finds damage below the file system, which no
  // stamp can see (`mate module-status --verify`). A library found damaged loses its stamp, so
  // that the next load hashes it too and does what the status says.
  bool verify = false;
};

ModuleStatus module_status(const ModuleSpec& spec, const std::string& library = "",
                           const StatusOptions& options = {});

struct CacheSummary {
  std::string cache_root;
  std::uint64_t cache_bytes = 0;
  // Empty, or why JIT builds cannot write the cache ("/x/base is not a directory").
  std::string cache_problem;
  std::string host_arch;
  // One per vendor, in the vendor table's order (mate/device/vendors.hpp).
  struct DeviceArchs {
    device::Kind kind = device::Kind::Host;
    std::string archs;  // "9.0 10.0", or why there is none
  };
  std::vector<DeviceArchs> device_archs;
  bool jit_enabled = true;
  std::vector<std::string> aot_directories;
};
CacheSummary cache_summary();

}  // namespace mate::jit
