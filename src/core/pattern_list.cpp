// fnmatch pattern lists (include/exclude selection of function names).
#include "mate/core/pattern_list.hpp"

#include <fnmatch.h>

namespace mate::core {

PatternList::PatternList(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {}

PatternList PatternList::parse(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = comma + 1;
  }
  return PatternList(std::move(out));
}

bool PatternList::matches(std::string_view name) const {
  std::string n(name);  // fnmatch needs a terminated string
  for (const std::string& p : patterns_) {
    if (::fnmatch(p.c_str(), n.c_str(), 0) == 0) return true;
  }
  return false;
}

bool selected(std::string_view name, const PatternList& include, const PatternList& exclude) {
  if (!include.empty() && !include.matches(name)) return false;
  return !exclude.matches(name);
}

}  // namespace mate::core
