// Running a build: a fresh private directory, a build.ninja, `ninja -C`, and publication by
// rename. Used by the JIT loader (under the module's lock) and by AOT builds.
#pragma once

#include <stdexcept>
#include <string>

#include "jit/plan.hpp"

namespace mate::jit::detail {

// Thrown by build_in_staging when its directory vanished under it (`mate clear-cache` renamed
// the cache away): not the build's fault; the loader builds again in the fresh cache.
struct CacheVanished : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Builds `plan` in a new directory under `parent` named .staging-<key>-<host>-<pid>-<n>, and
// writes its manifest.json. Returns the directory. Says on stderr when the build starts and
// when it ends (builds are rare and take seconds: a user wants to know why a call is slow).
// Throws ModuleError(BuildFailed) with the full build output and the failing command,
// ModuleError(NotBuildable) when ninja cannot be started, ModuleError(CacheError) when a file
// cannot be written, and CacheVanished.
// With BuildStamp::Write (JIT cache entries) the library's verified stamp is written too
// (verify.hpp); AOT builds keep theirs in the JIT cache of whoever loads them.
enum class BuildStamp { Write, None };
std::string build_in_staging(const Plan& plan, const std::string& parent, BuildStamp stamp);

enum class Publish { Published, AlreadyThere, ParentGone };
// Renames `staging` to `final_dir`. AlreadyThere: another process published first (staging is
// left in place). ParentGone: the cache was cleared meanwhile.
Publish publish(const std::string& staging, const std::string& final_dir);

// Removes .staging-<key>-<this host>-<pid>-* directories under `parent` whose process is dead
// (builds that were killed). Call while holding the key's lock.
void remove_dead_staging(const std::string& parent, const std::string& key);

}  // namespace mate::jit::detail
