// JSON as the `--json` options print it: indented, and still JSON when a value holds bytes that
// are not UTF-8 (a path or variable from the shell): those become U+FFFD instead of an exception.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace mate::cli {

inline std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace mate::cli
