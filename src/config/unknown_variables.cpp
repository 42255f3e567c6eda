// Warns about MATE_* variables that the registry does not know: a misspelt variable is
// otherwise silently ignored, which is the worst kind of configuration bug.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>
#include <tuple>

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

namespace {

std::vector<std::string_view> words(std::string_view name) {
  if (name.rfind("MATE_", 0) == 0) name.remove_prefix(5);
  std::vector<std::string_view> out;
  while (!name.empty()) {
    const std::size_t bar = name.find('_');
    if (bar != 0) out.push_back(name.substr(0, bar));
    if (bar == std::string_view::npos) break;
    name.remove_prefix(bar + 1);
  }
  return out;
}

// One word of a misspelt name stands for one word of a known name: the same, a prefix of it of
// three letters or more (LOG for LOGLEVEL, ARCH for ARCH in ARCH_LIST), or one edit away from a
// word of four letters or more (ARCHS, LOGLEVL).
bool word_matches(std::string_view typed, std::string_view known) {
  if (typed == known) return true;
  if (typed.size() >= 3 && known.rfind(typed, 0) == 0) return true;
  return typed.size() >= 4 && known.size() >= 4 && edit_distance(typed, known) <= 1;
}

}  // namespace

std::string suggest_variable(std::string_view typed) {
  // Two kinds of typo: a slip of a few letters (MATE_LOGLEVL, MATE_DISABLE_JTI), judged on the
  // part after MATE_, and the right words in another order or with one left out
  // (MATE_JIT_DISABLE, MATE_WORKSPACE, MATE_MUSA_ARCH, MATE_MAX_JOBS).
  const std::vector<std::string_view> typed_words = words(typed);
  if (typed_words.empty()) return "";
  std::string_view typed_tail = typed.rfind("MATE_", 0) == 0 ? typed.substr(5) : typed;
  struct Score {
    int kind = 3;                 // 0 every word matches, 1 letters slipped, 3 no match
    std::size_t extra = 0;        // the known name's words left unmatched
    int hidden = 0;               // internal and test-only names come after public ones
    std::size_t distance = 0;
    bool operator<(const Score& o) const {
      return std::tie(kind, extra, hidden, distance) < std::tie(o.kind, o.extra, o.hidden, o.distance);
    }
  };
  Score best;
  std::string suggestion;
  std::size_t order = 0;
  for (const VarInfo& v : all_variables()) {
    ++order;
    const std::vector<std::string_view> known_words = words(v.name);
    std::string_view known_tail = v.name.rfind("MATE_", 0) == 0 ? v.name.substr(5) : v.name;
    Score score;
    score.distance = edit_distance(typed_tail, known_tail);
    score.hidden = v.category == Category::Public ? 0 : 1;
    std::vector<bool> used(known_words.size(), false);
    std::size_t matched = 0;
    for (std::string_view w : typed_words) {
      for (std::size_t k = 0; k < known_words.size(); ++k) {
        if (!used[k] && word_matches(w, known_words[k])) {
          used[k] = true;
          ++matched;
          break;
        }
      }
    }
    if (matched == typed_words.size()) {
      score.kind = 0;
      score.extra = known_words.size() - matched;
      score.distance = order;  // ties go to the one the registry lists first (MATE_LOG: LOGLEVEL)
    } else if (score.distance <= std::max<std::size_t>(1, typed_tail.size() / 4)) {
      score.kind = 1;
    } else {
      continue;
    }
    if (score < best) {
      best = score;
      suggestion = std::string(v.name);
    }
  }
  return suggestion;
}

std::vector<UnknownVariable> unknown_variables() {
  std::vector<UnknownVariable> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.rfind("MATE_", 0) != 0) continue;
    auto eq = entry.find('=');
    std::string_view name = entry.substr(0, eq);
    if (find(name) != nullptr) continue;
    out.push_back({std::string(name), eq == entry.npos ? std::string() : std::string(entry.substr(eq + 1)),
                   suggest_variable(name)});
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
        if (!parse(Var::MATE_WARN_UNKNOWN_ENV, silence).boolean) return;
      } catch (const ConfigError& e) {
        // Nothing else reads this variable: say it here, and warn as by default.
        std::fprintf(stderr, "mate: warning: %s Warning about unknown variables as by default.\n", e.what());
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
