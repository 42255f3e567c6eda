// Taking the guard out of an environment (mate/core/child_environment.hpp).
#include "mate/core/child_environment.hpp"

#include <string_view>

namespace mate::core {

namespace {

constexpr std::string_view kPreloadName = "libmate_guard_preload";

// "LD_PRELOAD=a:b c" without the guard's library (ld.so separates entries by ':' or spaces).
std::string without_guard_preload(std::string_view entry) {
  constexpr std::string_view kPrefix = "LD_PRELOAD=";
  std::string kept(kPrefix);
  std::string_view rest = entry.substr(kPrefix.size());
  while (!rest.empty()) {
    const std::size_t cut = rest.find_first_of(": ");
    const std::string_view item = rest.substr(0, cut);
    const std::string_view file = item.substr(item.rfind('/') + 1);  // npos + 1 == 0
    if (!item.empty() && file.rfind(kPreloadName, 0) != 0) {
      if (kept.size() > kPrefix.size()) kept += ':';
      kept += item;
    }
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 1);
  }
  return kept;
}

}  // namespace

std::vector<std::string> unguarded_environment(char* const* base) {
  std::vector<std::string> env;
  for (char* const* e = base; *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.rfind("MATE_GUARD_ALLOCATOR_", 0) == 0) continue;
    if (entry.rfind("LD_PRELOAD=", 0) == 0) {
      std::string kept = without_guard_preload(entry);
      if (kept != "LD_PRELOAD=") env.push_back(std::move(kept));
      continue;
    }
    env.emplace_back(entry);
  }
  return env;
}

}  // namespace mate::core
