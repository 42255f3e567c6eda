// Warns about MATE_* variables that the registry does not know: a misspelt variable is
// otherwise silently ignored, which is the worst kind of configuration bug.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>


#include "mate/config.hpp"

extern char** environ;

namespace mate::config {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<UnknownVariable> unknown_variables() {
  std::vector<UnknownVariable> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.rfind("MATE_", 0) != 0) continue;
    auto eq = entry.find('=');
    std::string_view name = entry.substr(0, eq);
    if (find(name) != nullptr) continue;
    UnknownVariable u{std::string(name),
                      eq == entry.npos ? std::string() : std::string(entry.substr(eq + 1)), ""};
    // Suggest the closest known name when it is plausibly a typo.
    std::size_t best = std::max<std::size_t>(3, name.size() / 5) + 1;
    for (const VarInfo& v : all_variables()) {
      std::size_t d = edit_distance(name, v.name);
      if (d < best) {
        best = d;
        u.suggestion = std::string(v.name);
      }
    }
    out.push_back(std::move(u));
  }
  std::sort(out.begin(), out.end(),
            [](const UnknownVariable& a, const UnknownVariable& b) { return a.name < b.name; });
  return out;
}

void warn_unknown_variables_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Read the switch directly: the registry getters call this function.
    const char* silence = raw_env_unsafe(Var::MATE_WARN_UNKNOWN_ENV);
    if (silence != nullptr) {
      try {
        if (!parse(Var::MATE_WARN_UNKNOWN_ENV, silence).b) return;
      } catch (const ConfigError&) {
        // An invalid value is reported when the variable is read; warn meanwhile.
      }
    }
    for (const UnknownVariable& u : unknown_variables()) {
      std::string hint = u.suggestion.empty() ? std::string() : " (did you mean " + u.suggestion + "?)";
      std::fprintf(stderr,
                   "mate: warning: unknown environment variable %s%s; it has no effect. "
                   "Run `mate env --all` for the known ones, MATE_WARN_UNKNOWN_ENV=0 to silence.\n",
                   u.name.c_str(), hint.c_str());
    }
  });
}

}  // namespace mate::config
