// Strict parsing of variable values. Every rejection names the variable, the value and what is
// accepted, so a user can fix a launch script without reading MATE's source.
//
// No fmt here, on purpose: the guard's preload library parses its variables with this file, and
// it must not load libfmt into every program `mate guard-run` starts (each library it loads costs
// the guarded program resident pages; bench/README.md "guard"). Messages are built with
// std::string and std::to_chars.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

#include "scalar_rules.hpp"
#include "mate/config.hpp"

namespace mate::config {

ConfigError::ConfigError(std::string variable, std::string value, std::string message)
    : std::runtime_error(std::move(message)),
      variable_(std::move(variable)),
      value_(std::move(value)) {}

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    std::size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string_view::npos ? s.npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

// The parsed form of an `accepts` spec for numbers: a set, or a range with optional bounds.
struct NumberSpec {
  std::vector<double> set;
  std::optional<double> lo, hi;
};

template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T out{};
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return out;
}

NumberSpec number_spec(std::string_view accepts) {
  NumberSpec spec;
  if (accepts.empty()) return spec;
  if (auto dots = accepts.find(".."); dots != std::string_view::npos) {
    if (dots > 0) spec.lo = parse_number<double>(accepts.substr(0, dots));
    if (dots + 2 < accepts.size()) spec.hi = parse_number<double>(accepts.substr(dots + 2));
    return spec;
  }
  for (auto item : split(accepts, '|')) spec.set.push_back(*parse_number<double>(item));
  return spec;
}

std::string_view number_word(Type t) { return t == Type::Int ? "an integer" : "a number"; }

// Whole numbers in full ("1000000", as fmt's "{}" wrote them), others as the shortest text
// that reads back as x ("0.5").
std::string number_text(double x) {
  // Compared through int64 rather than with std::trunc: the guard's preload links libm
  // statically and only what needs no CPU dispatch (src/guard/CMakeLists.txt).
  if (x > -1e15 && x < 1e15 && static_cast<double>(static_cast<std::int64_t>(x)) == x)
    return std::to_string(static_cast<std::int64_t>(x));
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof text, x);
  return ec == std::errc() ? std::string(text, end) : std::string("?");
}

template <typename Items>
std::string joined(const Items& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

[[noreturn]] void reject(const VarInfo& v, std::string_view value, std::string_view why) {
  throw ConfigError(
      std::string(v.name), std::string(value),
      std::string(v.name) + "='" + std::string(value) + "' is invalid: " + std::string(why) +
          "; accepted: " + accepted_values(v.id) + ". Run `mate env --all` for the reference.");
}

[[noreturn]] void reject(const VarInfo& v, std::string_view value, Rejection why) {
  switch (why) {
    case Rejection::NotBoolean: reject(v, value, "not a boolean");
    case Rejection::NotInteger: reject(v, value, "not an integer");
    case Rejection::NotInSet: reject(v, value, "not one of the supported values");
    case Rejection::OutOfRange: reject(v, value, "out of range");
    case Rejection::NotChoice:
    case Rejection::None: break;
  }
  reject(v, value, "not a supported choice");
}

template <typename T>
T parse_checked_number(const VarInfo& v, std::string_view text) {
  auto n = parse_number<T>(text);
  if (!n) {
    T ignored{};
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), ignored);
    if (ec == std::errc::result_out_of_range && ptr == text.data() + text.size()) reject(v, text, "out of range");
    reject(v, text, "not " + std::string(number_word(v.type)));
  }
  const double x = static_cast<double>(*n);
  if (!std::isfinite(x)) reject(v, text, "not a finite number");
  const NumberSpec spec = number_spec(v.accepts);
  if (!spec.set.empty() && std::find(spec.set.begin(), spec.set.end(), x) == spec.set.end())
    reject(v, text, "not one of the supported values");
  if ((spec.lo && x < *spec.lo) || (spec.hi && x > *spec.hi)) reject(v, text, "out of range");
  return *n;
}

std::vector<std::string> parse_patterns(std::string_view text) {
  std::vector<std::string> out;
  for (auto item : split(text, ',')) {
    item = trim(item);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

bool is_arch(std::string_view item) {
  auto dot = item.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == item.size()) return false;
  auto digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  // A major version 1 to 99 and a minor 0 to 9 (compute capability 9.0, 12.0; MUSA 3.1; "09.0"
  // is 9.0): what the compilers' sm_XY / mp_XY names can say. "0.0" or "99999999999999999999.0"
  // would only fail later, inside nvcc, after module-status had shown them as ordinary archs.
  auto number = [&](std::string_view s, int* out) {
    if (s.size() > 4 || !digits(s)) return false;
    *out = std::stoi(std::string(s));
    return true;
  };
  int major = 0, minor = 0;
  return number(item.substr(0, dot), &major) && number(item.substr(dot + 1), &minor) && major >= 1 && major <= 99 &&
         minor <= 9;
}

std::vector<std::string> parse_arch_list(const VarInfo& v, std::string_view text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (j > i) {
      std::string_view item = text.substr(i, j - i);
      if (!is_arch(item))
        reject(v, text, "'" + std::string(item) + "' is not a major.minor architecture (major 1 to 99, minor 0 to 9)");
      out.emplace_back(item);
    }
    i = j;
  }
  return out;
}

}  // namespace

std::string accepted_values(Var id) {
  const VarInfo& v = info(id);
  switch (v.type) {
    case Type::Bool:
      return "1/0, true/false, yes/no, on/off (any case)";
    case Type::Int:
    case Type::Float: {
      const NumberSpec spec = number_spec(v.accepts);
      if (!spec.set.empty()) {
        std::vector<std::string> items;
        for (double x : spec.set) items.push_back(number_text(x));
        return "one of " + joined(items);
      }
      if (spec.lo && spec.hi)
        return std::string(number_word(v.type)) + " from " + number_text(*spec.lo) + " to " + number_text(*spec.hi);
      // Integers are 64-bit: the top is said, so "out of range" for 2^63 is not a riddle.
      if (spec.lo && v.type == Type::Int)
        return "an integer from " + number_text(*spec.lo) + " to " + std::to_string(std::numeric_limits<std::int64_t>::max());
      if (spec.lo) return std::string(number_word(v.type)) + " >= " + number_text(*spec.lo);
      return std::string(number_word(v.type));
    }
    case Type::Enum:
      return "one of " + joined(split(v.accepts, '|'));
    case Type::PatternList:
      return "comma-separated fnmatch patterns";
    case Type::ArchList:
      return v.id == Var::MATE_MUSA_ARCH_LIST ? "space-separated major.minor values such as \"3.1 4.0\""
                                              : "space-separated major.minor values such as \"9.0 10.0\"";
    case Type::String:
      return "any text";
    case Type::Path:
      return "a file system path";
  }
  return "";
}

Value parse(Var id, std::string_view text) {
  const VarInfo& v = info(id);
  text = trim(text);
  if (text.empty()) text = v.default_value;
  Value out;
  if (text.empty()) return out;  // unset with no default: the consumer decides
  Rejection why = Rejection::None;
  switch (v.type) {
    case Type::Bool:
      why = read_bool(text, &out.boolean);
      break;
    case Type::Int:
      why = read_int(text, v.accepts, &out.integer);
      break;
    case Type::Float:
      out.real = parse_checked_number<double>(v, text);
      break;
    case Type::Enum: {
      std::string_view choice;
      why = read_choice(text, v.accepts, &choice);
      out.text = std::string(choice);
      break;
    }
    case Type::String:
    case Type::Path:
      out.text = std::string(text);
      break;
    case Type::PatternList:
      out.list = parse_patterns(text);
      break;
    case Type::ArchList:
      out.list = parse_arch_list(v, text);
      break;
  }
  if (why != Rejection::None) reject(v, text, why);
  return out;
}

}  // namespace mate::config
