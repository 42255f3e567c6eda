// mate/config.hpp — the typed registry of every environment variable MATE reads.
//
// Contract:
//  * Every variable is declared once, in include/mate/config_variables.inc. Nothing else in MATE reads a
//    MATE_* variable; components call the typed getters below.
//  * Parsing is strict. Booleans: 1/0, true/false, yes/no, on/off (any case, spaces trimmed).
//    Numbers must be consumed whole, then are checked against the accepted set or range.
//    An empty value counts as unset.
//  * An invalid value throws mate::config::ConfigError naming the variable, the value and what
//    is accepted. That is the only exception type the registry throws.
//  * Latched variables are read once, on first use; Live ones on every call.
//  * Tests change values with ScopedOverride, never with setenv.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mate::config {

// Thrown for an invalid value of a variable. what() is the full user-facing message.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string variable, std::string value, std::string message);
  const std::string& variable() const noexcept { return variable_; }
  const std::string& value() const noexcept { return value_; }

 private:
  std::string variable_;
  std::string value_;
};

enum class Type { Bool, Int, Float, String, Path, Enum, PatternList, ArchList };
enum class Category { Public, Internal, TestOnly, External };
enum class Policy { Latched, Live };

// One identifier per variable, in declaration order.
enum class Var : int {
#define MATE_VAR(getter, NAME, ...) NAME,
#include "mate/config_variables.inc"
#undef MATE_VAR
};

// What the registry knows of one variable.
struct VarInfo {
  Var id;
  std::string_view name;
  Type type;
  std::string_view default_value;  // "" = no value; the consumer decides
  std::string_view shown_default;  // as told to people
  Category category;
  Policy policy;
  std::string_view accepts;  // see config_variables.inc
  std::string_view doc;
};

// Every variable, in declaration order (a constant table: reading it allocates nothing).
std::span<const VarInfo> all_variables();
const VarInfo& info(Var v);
// nullptr when the name is not a registered variable.
const VarInfo* find(std::string_view name);

std::string_view to_string(Type t);
std::string_view to_string(Category c);
std::string_view to_string(Policy p);

// A parsed value. Exactly one member is meaningful, chosen by the variable's type.
struct Value {
  bool boolean = false;           // Bool
  std::int64_t integer = 0;       // Int
  double real = 0.0;              // Float
  std::string text;               // String, Path, Enum
  std::vector<std::string> list;  // PatternList, ArchList
};

// Parses `text` as a value of variable `v` (after trimming; "" means the default).
// Throws ConfigError when the text is not accepted.
Value parse(Var v, std::string_view text);

// Human-readable description of what `v` accepts, e.g. "one of 0, 1, 3, 5, 10".
std::string accepted_values(Var v);

// Where the current value comes from.
enum class Source { Default, Environment, Override };
std::string_view to_string(Source s);

// The raw text currently in force for `v` (override, else environment), trimmed; nullopt when
// unset or empty. Does not validate.
std::optional<std::string> raw(Var v);
Source source(Var v);
// True when the variable has a non-empty value (environment or override).
bool is_set(Var v);
// The parsed current value (default when unset). Throws ConfigError when invalid.
Value get(Var v);

// Reads the environment without allocating, for code that runs before malloc is usable
// (the guard allocator's preload shim). Returns nullptr when unset. No override applies.
const char* raw_env_unsafe(Var v) noexcept;
// The same for code that runs in a signal handler (the guard's fault reports): walks the
// environment array itself, as the C library's lookup (not on POSIX's async-signal-safe list) would. A thread changing
// the environment at that moment (setenv may move the array) is the one race left; the
// faulting thread itself is not in setenv.
const char* raw_env_in_signal_handler(Var v) noexcept;

// The value of a Bool, Int or Enum variable, parsed by the same rules as parse() without
// allocating or throwing: what the guard's preload library reads at start-up, where every page
// of code it runs is charged to the guarded program. `choice` (Enum) points into the registry's
// table. ok is false when the text is not accepted (parse() says why) or the variable has
// another type; `set` is false when the text is blank and the variable has no default.
struct Scalar {
  bool ok = false;
  bool set = false;
  bool boolean = false;       // Bool
  std::int64_t integer = 0;   // Int
  std::string_view choice;    // Enum
};
Scalar parse_scalar(Var v, std::string_view text) noexcept;

// Typed getters, one per variable: bool, std::int64_t, double, std::string, or
// std::vector<std::string> by type. Throw ConfigError on invalid values.
#define MATE_CONFIG_TYPE_Bool bool
#define MATE_CONFIG_TYPE_Int std::int64_t
#define MATE_CONFIG_TYPE_Float double
#define MATE_CONFIG_TYPE_String std::string
#define MATE_CONFIG_TYPE_Path std::string
#define MATE_CONFIG_TYPE_Enum std::string
#define MATE_CONFIG_TYPE_PatternList std::vector<std::string>
#define MATE_CONFIG_TYPE_ArchList std::vector<std::string>
#define MATE_VAR(getter, NAME, TYPE, ...) MATE_CONFIG_TYPE_##TYPE getter();
#include "mate/config_variables.inc"
#undef MATE_VAR

// The one rule between two variables (shard_rule.cpp): MATE_PYTEST_SHARD_INDEX must be below
// MATE_PYTEST_SHARD_TOTAL. The message naming both for `index` and `total` that break it, ""
// when they keep it: `mate env --check` reports it, the test runners refuse to start on it.
std::string shard_index_error(std::int64_t index, std::int64_t total);

// Replaces the value of one variable in this process for the object's lifetime (tests).
// nullopt makes the variable read as unset. Overrides nest; latched values are not consulted
// while any override is active.
class ScopedOverride {
 public:
  ScopedOverride(Var v, std::optional<std::string> value);
  ~ScopedOverride();
  ScopedOverride(const ScopedOverride&) = delete;
  ScopedOverride& operator=(const ScopedOverride&) = delete;

 private:
  Var var_;
  bool had_previous_;
  std::optional<std::string> previous_;
};

// MATE_* variables in the environment that the registry does not know.
struct UnknownVariable {
  std::string name;
  std::string value;
  std::string suggestion;  // closest known name, or "" when none is close
};
std::vector<UnknownVariable> unknown_variables();

// Prints one warning per unknown MATE_* variable to stderr, at most once per process, unless
// MATE_WARN_UNKNOWN_ENV=0. Called on first use of the registry; safe to call again.
void warn_unknown_variables_once();

// The known variable a misspelt MATE_* name most likely meant, or "" when none is close: a slip
// of a few letters, or the right words in another order or with one left out.
std::string suggest_variable(std::string_view typed);

// Levenshtein distance, used for did-you-mean suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace mate::config
