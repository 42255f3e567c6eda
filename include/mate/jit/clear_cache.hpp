// mate/jit/clear_cache.hpp — what `mate clear-cache` does: remove this MATE version's JIT module
// cache (or every version's), safely while other processes use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mate::jit {

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

}  // namespace mate::jit
