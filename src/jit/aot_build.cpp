// `mate aot-build`: each module built in a staging directory and published into
// <out>/<arch>/<name>/<key>/, replacing older builds, then the root's manifest.json.
#include "mate/jit/aot_build.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "jit/aot.hpp"
#include "jit/build.hpp"
#include "jit/cache.hpp"
#include "jit/plan.hpp"

namespace mate::jit {

using namespace detail;
namespace fs = std::filesystem;

std::vector<AotResult> build_aot(const std::vector<ModuleSpec>& specs, const std::string& out_dir) {
  make_directories(out_dir);
  std::string root = fs::absolute(out_dir).lexically_normal().string();
  check_index_replaceable(root);  // before building: nothing is built into someone else's directory
  std::vector<AotResult> results;
  for (const auto& spec : specs) {
    AotResult r;
    r.name = spec.name;
    Plan plan = make_plan(spec, "");
    r.key = plan.key;
    if (!plan.arch_known || !plan.buildable) {
      r.skipped_reason = plan.why_not_buildable;
      results.push_back(std::move(r));
      continue;
    }
    std::string parent = root + "/" + plan.arch + "/" + spec.name;
    make_directories(parent);
    std::string final_dir = parent + "/" + plan.key;
    std::string staging;
    try {
      staging = build_in_staging(plan, parent, BuildStamp::None);
    } catch (const CacheVanished& e) {
      throw ModuleError(ModuleError::Kind::CacheError,
                        fmt::format("AOT build into {}: {}", root, e.what()));
    }
    remove_tree(final_dir);
    // Older builds of the same module are replaced: one AOT module per name and arch.
    std::error_code ec;
    for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().string() != staging) remove_tree(it->path().string());
    if (publish(staging, final_dir) != Publish::Published)
      throw ModuleError(ModuleError::Kind::CacheError, fmt::format("cannot publish AOT module {}", final_dir));
    r.built = true;
    r.path = final_dir + "/module.so";
    results.push_back(std::move(r));
  }
  write_aot_index(root);
  return results;
}

}  // namespace mate::jit
