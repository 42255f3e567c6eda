// The Bool, Int and Enum value rules (and trim), private to the config component: parse()
// (parse.cpp) and parse_scalar() (scalar_rules.cpp) both apply them.
#pragma once

#include <cstdint>
#include <string_view>

namespace mate::config {

// Strips leading and trailing white space.
std::string_view trim(std::string_view s) noexcept;

// Why a Bool, Int or Enum text was not accepted (parse() turns it into words).
enum class Rejection { None, NotBoolean, NotInteger, NotInSet, OutOfRange, NotChoice };

// The scalar rules, shared by parse() and parse_scalar(); `text` is already trimmed. They
// allocate nothing and throw nothing (see parse_scalar in mate/config.hpp).
Rejection read_bool(std::string_view text, bool* out) noexcept;
// `accepts`: "" (any integer), "a|b|c" (one of them) or "lo..hi" (either bound may be absent).
Rejection read_int(std::string_view text, std::string_view accepts, std::int64_t* out) noexcept;
// `accepts`: "a|b|c", lower case; the text matches in any case; *out points into `accepts`.
Rejection read_choice(std::string_view text, std::string_view accepts, std::string_view* out) noexcept;

}  // namespace mate::config
