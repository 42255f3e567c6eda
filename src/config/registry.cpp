// The registry: the table built from config_variables.inc, the value lookup (override, then
// environment, then default), latching, and the typed getters.
//
// This file and unknown_variables.cpp are the only places in MATE that read MATE_* variables.
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

#include "scalar_rules.hpp"
#include "mate/config.hpp"

extern char** environ;

namespace mate::config {

namespace {

constexpr std::size_t kCount = 0
#define MATE_VAR(...) +1
#include "mate/config_variables.inc"
#undef MATE_VAR
    ;

// Latched variables read the environment once; the parsed value (or the error) is kept.
struct LatchSlot {
  std::once_flag once;
  std::optional<std::string> raw;
  std::optional<Value> value;
  std::optional<ConfigError> error;
};

std::array<LatchSlot, kCount>& latch_slots() {
  static std::array<LatchSlot, kCount> slots;
  return slots;
}

// Test overrides. `active` lets the common path skip the mutex.
struct Overrides {
  std::mutex mutex;
  std::map<Var, std::optional<std::string>> values;
  std::atomic<int> active{0};
};

Overrides& overrides() {
  static Overrides o;
  return o;
}

std::optional<std::string> read_env(const VarInfo& v) {
  const char* text = std::getenv(std::string(v.name).c_str());
  if (text == nullptr) return std::nullopt;
  std::string_view t = trim(text);
  if (t.empty()) return std::nullopt;
  return std::string(t);
}

// Returns true and sets `out` when an override is active for `v`.
bool override_for(Var v, std::optional<std::string>& out) {
  Overrides& o = overrides();
  if (o.active.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard lock(o.mutex);
  auto it = o.values.find(v);
  if (it == o.values.end()) return false;
  out = it->second;
  if (out) {
    std::string_view t = trim(*out);
    out = t.empty() ? std::nullopt : std::optional<std::string>(std::string(t));
  }
  return true;
}

LatchSlot& latched(const VarInfo& v) {
  LatchSlot& slot = latch_slots()[static_cast<std::size_t>(v.id)];
  std::call_once(slot.once, [&] {
    slot.raw = read_env(v);
    try {
      slot.value = parse(v.id, slot.raw.value_or(""));
    } catch (const ConfigError& e) {
      slot.error = e;
    }
  });
  return slot;
}

// A constant table: built by the compiler, never at run time (the guard's preload reads it
// before the program's allocator may be used).
constexpr VarInfo kVariables[] = {
#define MATE_VAR(getter, NAME, TYPE, DEFAULT, SHOWN, CATEGORY, POLICY, ACCEPTS, DOC) \
  VarInfo{Var::NAME, #NAME, Type::TYPE, DEFAULT, SHOWN, Category::CATEGORY, Policy::POLICY, ACCEPTS, DOC},
#include "mate/config_variables.inc"
#undef MATE_VAR
};
static_assert(std::size(kVariables) == kCount);

}  // namespace

std::span<const VarInfo> all_variables() { return kVariables; }

const VarInfo& info(Var v) { return all_variables()[static_cast<std::size_t>(v)]; }

const VarInfo* find(std::string_view name) {
  for (const VarInfo& v : all_variables())
    if (v.name == name) return &v;
  return nullptr;
}

std::string_view to_string(Type t) {
  switch (t) {
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "string";
    case Type::Path: return "path";
    case Type::Enum: return "enum";
    case Type::PatternList: return "patterns";
    case Type::ArchList: return "arch list";
  }
  return "?";
}

std::string_view to_string(Category c) {
  switch (c) {
    case Category::Public: return "public";
    case Category::Internal: return "internal";
    case Category::TestOnly: return "test-only";
    case Category::External: return "external";
  }
  return "?";
}

std::string_view to_string(Policy p) { return p == Policy::Latched ? "latched" : "live"; }

std::string_view to_string(Source s) {
  switch (s) {
    case Source::Default: return "default";
    case Source::Environment: return "environment";
    case Source::Override: return "override";
  }
  return "?";
}

std::optional<std::string> raw(Var id) {
  warn_unknown_variables_once();
  std::optional<std::string> out;
  if (override_for(id, out)) return out;
  const VarInfo& v = info(id);
  if (v.policy == Policy::Latched) return latched(v).raw;
  return read_env(v);
}

Source source(Var id) {
  std::optional<std::string> out;
  if (override_for(id, out)) return Source::Override;
  return raw(id) ? Source::Environment : Source::Default;
}

bool is_set(Var v) { return raw(v).has_value(); }

Value get(Var id) {
  warn_unknown_variables_once();
  std::optional<std::string> text;
  if (override_for(id, text)) return parse(id, text.value_or(""));
  const VarInfo& v = info(id);
  if (v.policy == Policy::Latched) {
    LatchSlot& slot = latched(v);
    if (slot.error) throw *slot.error;
    return *slot.value;
  }
  return parse(id, read_env(v).value_or(""));
}

const char* raw_env_unsafe(Var v) noexcept {
  // The names are string literals from the table, so c_str() is not needed (no allocation).
  return std::getenv(info(v).name.data());
}

const char* raw_env_in_signal_handler(Var v) noexcept {
  const std::string_view name = info(v).name;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* entry = *e;
    std::size_t i = 0;
    while (i < name.size() && entry[i] == name[i]) ++i;
    if (i == name.size() && entry[i] == '=') return entry + i + 1;
  }
  return nullptr;
}

ScopedOverride::ScopedOverride(Var v, std::optional<std::string> value) : var_(v) {
  Overrides& o = overrides();
  std::lock_guard lock(o.mutex);
  auto it = o.values.find(v);
  had_previous_ = it != o.values.end();
  if (had_previous_) previous_ = it->second;
  o.values[v] = std::move(value);
  o.active.fetch_add(1, std::memory_order_release);
}

ScopedOverride::~ScopedOverride() {
  Overrides& o = overrides();
  std::lock_guard lock(o.mutex);
  if (had_previous_) o.values[var_] = previous_;
  else o.values.erase(var_);
  o.active.fetch_sub(1, std::memory_order_release);
}

// Typed getters.
#define MATE_CONFIG_FIELD_Bool boolean
#define MATE_CONFIG_FIELD_Int integer
#define MATE_CONFIG_FIELD_Float real
#define MATE_CONFIG_FIELD_String text
#define MATE_CONFIG_FIELD_Path text
#define MATE_CONFIG_FIELD_Enum text
#define MATE_CONFIG_FIELD_PatternList list
#define MATE_CONFIG_FIELD_ArchList list
#define MATE_VAR(getter, NAME, TYPE, ...) \
  MATE_CONFIG_TYPE_##TYPE getter() { return get(Var::NAME).MATE_CONFIG_FIELD_##TYPE; }
#include "mate/config_variables.inc"
#undef MATE_VAR

}  // namespace mate::config
