// The Bool, Int and Enum value rules, without allocating or throwing: parse() builds its
// messages on top of them, and the guard's preload library reads its variables with
// parse_scalar() at start-up, where every page of code it runs costs the guarded program.
#include <cctype>
#include <charconv>

#include "scalar_rules.hpp"
#include "mate/config.hpp"

namespace mate::config {

namespace {

bool equals_ignoring_case(std::string_view text, std::string_view word) noexcept {
  if (text.size() != word.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i])) != word[i]) return false;
  return true;
}

bool to_int(std::string_view text, std::int64_t* out) noexcept {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

// Calls fn(item) for each '|'-separated item of `list` until it returns true.
template <typename Fn>
bool any_item(std::string_view list, Fn fn) noexcept {
  while (true) {
    const std::size_t bar = list.find('|');
    if (fn(list.substr(0, bar))) return true;
    if (bar == std::string_view::npos) return false;
    list.remove_prefix(bar + 1);
  }
}

}  // namespace

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

Rejection read_bool(std::string_view text, bool* out) noexcept {
  for (std::string_view word : {"1", "true", "yes", "on"}) {
    if (equals_ignoring_case(text, word)) {
      *out = true;
      return Rejection::None;
    }
  }
  for (std::string_view word : {"0", "false", "no", "off"}) {
    if (equals_ignoring_case(text, word)) {
      *out = false;
      return Rejection::None;
    }
  }
  return Rejection::NotBoolean;
}

// Whole digits (with an optional '-') that do not fit an int64.
bool too_large_int(std::string_view text) noexcept {
  std::int64_t ignored = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), ignored);
  return ec == std::errc::result_out_of_range && ptr == text.data() + text.size();
}

Rejection read_int(std::string_view text, std::string_view accepts, std::int64_t* out) noexcept {
  if (!to_int(text, out)) return too_large_int(text) ? Rejection::OutOfRange : Rejection::NotInteger;
  const std::int64_t x = *out;
  if (accepts.empty()) return Rejection::None;
  if (const std::size_t dots = accepts.find(".."); dots != std::string_view::npos) {
    std::int64_t bound = 0;
    if (dots > 0 && to_int(accepts.substr(0, dots), &bound) && x < bound) return Rejection::OutOfRange;
    if (dots + 2 < accepts.size() && to_int(accepts.substr(dots + 2), &bound) && x > bound)
      return Rejection::OutOfRange;
    return Rejection::None;
  }
  const bool listed = any_item(accepts, [x](std::string_view item) {
    std::int64_t value = 0;
    return to_int(item, &value) && value == x;
  });
  return listed ? Rejection::None : Rejection::NotInSet;
}

Rejection read_choice(std::string_view text, std::string_view accepts, std::string_view* out) noexcept {
  const bool listed = any_item(accepts, [&](std::string_view choice) {
    if (!equals_ignoring_case(text, choice)) return false;
    *out = choice;
    return true;
  });
  return listed ? Rejection::None : Rejection::NotChoice;
}

Scalar parse_scalar(Var id, std::string_view text) noexcept {
  const VarInfo& v = info(id);
  Scalar out;
  if (v.type != Type::Bool && v.type != Type::Int && v.type != Type::Enum) return out;
  text = trim(text);
  if (text.empty()) text = v.default_value;
  if (text.empty()) {  // unset with no default: the consumer decides
    out.ok = true;
    return out;
  }
  Rejection r = v.type == Type::Bool  ? read_bool(text, &out.boolean)
                : v.type == Type::Int ? read_int(text, v.accepts, &out.integer)
                                      : read_choice(text, v.accepts, &out.choice);
  out.ok = out.set = r == Rejection::None;
  return out;
}

}  // namespace mate::config
