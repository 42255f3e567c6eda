// mate/core/pattern_list.hpp — lists of fnmatch(3) patterns, e.g. MATE_DUMP_INCLUDE/EXCLUDE.
//
// A name matches a list when it matches any pattern in it (fnmatch with no flags: `*` and `?`
// also match `.`, so "Gemm.*" matches "Gemm.run"). The empty list matches nothing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mate::core {

class PatternList {
 public:
  PatternList() = default;
  explicit PatternList(std::vector<std::string> patterns);
  // Splits comma-separated text, trimming spaces and dropping empty items.
  static PatternList parse(std::string_view comma_separated);

  bool matches(std::string_view name) const;
  bool empty() const noexcept { return patterns_.empty(); }
  const std::vector<std::string>& patterns() const noexcept { return patterns_; }

 private:
  std::vector<std::string> patterns_;
};

// The include/exclude rule: selected when `include` is empty or matches, and `exclude` does not.
bool selected(std::string_view name, const PatternList& include, const PatternList& exclude);

}  // namespace mate::core
