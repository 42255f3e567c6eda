// mate/replay/registry.hpp — the functions `mate replay` can run again from a level-10 dump.
//
// A kernel library registers each API function with one line, at namespace scope, next to it:
//
//   MATE_REPLAYABLE("gemm", &mylib::gemm);
//   MATE_REPLAYABLE("axpy", &mylib::axpy, "x", "y", "out", "alpha");  // names checked too
//
// The name is the one the function's MATE_API(...) logs. The parameter types come from the
// function pointer, and the dump's recorded arguments are matched to them by position:
//   const DLTensor*            an input tensor (rebuilt from its snapshot, read-only)
//   DLTensor*                  a tensor the function may write (output or in place)
//   bool, integers, enums      recorded bool / int / uint / enum values
//   float, double              recorded floats
//   std::string, std::string_view, const char*  recorded strings
// A mismatch (count, kind, or a given name) is a clear per-call error, never a crash. A
// function's return value, when it has one MATE logs, is compared with the recorded "return".
//
// Registrations run when the program (or a library loaded with `mate replay --lib`) starts.
// The registry is process-wide and thread-safe.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "mate/log/arg.hpp"

namespace mate::dump {
struct CallRecord;
}

namespace mate::replay {

// Value: any recorded non-tensor argument as it was recorded (Value::recorded), for functions
// whose parameters are not typed (Python's).
enum class ParamKind { InputTensor, WritableTensor, Bool, Int, UInt, Enum, Float, String, Value };
const char* to_string(ParamKind k) noexcept;

// One argument of a replayed call, built from the dump.
struct Value {
  DLTensor* tensor = nullptr;  // tensor parameters; nullptr when recorded as absent
  bool bool_value = false;
  std::int64_t int_value = 0;    // signed integers and enums
  std::uint64_t uint_value = 0;  // unsigned integers
  double float_value = 0;
  std::string text;
  bool null_string = false;  // a const char* recorded as null
  const log::Arg* recorded = nullptr;  // the argument as call.json records it (every kind)
};

struct Replayable {
  std::string name;
  std::vector<ParamKind> params;
  std::vector<std::string> names;  // empty, or one per parameter (checked against the dump)
  // Calls the function; returns its return value as logged, or nullopt for void.
  std::function<std::optional<log::Arg>(std::vector<Value>&)> invoke;
};

// Adds `r`. A second registration of the same name replaces the first (a library loaded with
// --lib overrides the built-in reference ops).
void register_function(Replayable r);
// nullptr when `name` is not registered.
const Replayable* find_function(std::string_view name);
std::vector<std::string> registered_functions();
// Removes one registration (tests).
void unregister_function(std::string_view name);

// Calls logged from Python (call.json's "python": module:qualname and script) are not in the
// registry: the Python package's replay (`python -m mate replay`) sets a resolver that imports
// the function and builds its Replayable from the call's recorded arguments, or throws
// std::runtime_error saying why it cannot. Without a resolver such a call is an error that says
// to replay it with `python -m mate replay`. nullptr removes the resolver.
using PythonResolver = std::function<Replayable(const dump::CallRecord& call)>;
void set_python_resolver(PythonResolver resolver);
const PythonResolver& python_resolver();

namespace detail {

template <class T>
constexpr ParamKind param_kind() {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<T, const DLTensor*>) return ParamKind::InputTensor;
  else if constexpr (std::is_same_v<T, DLTensor*>) return ParamKind::WritableTensor;
  else if constexpr (std::is_same_v<U, bool>) return ParamKind::Bool;
  else if constexpr (std::is_enum_v<U>) return ParamKind::Enum;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) return ParamKind::Int;
  else if constexpr (std::is_integral_v<U>) return ParamKind::UInt;
  else if constexpr (std::is_floating_point_v<U>) return ParamKind::Float;
  else if constexpr (std::is_same_v<U, std::string> || std::is_same_v<U, std::string_view> ||
                     std::is_same_v<U, const char*>)
    return ParamKind::String;
  else
    static_assert(sizeof(U) == 0,
                  "MATE_REPLAYABLE: parameter types must be const DLTensor*, DLTensor*, bool, integers, "
                  "enums, float, double, std::string, std::string_view or const char*");
}

template <class T>
decltype(auto) value_as(Value& v) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<T, const DLTensor*> || std::is_same_v<T, DLTensor*>) return static_cast<T>(v.tensor);
  else if constexpr (std::is_same_v<U, bool>) return v.bool_value;
  else if constexpr (std::is_enum_v<U>) return static_cast<U>(v.int_value);
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) return static_cast<U>(v.int_value);
  else if constexpr (std::is_integral_v<U>) return static_cast<U>(v.uint_value);
  else if constexpr (std::is_floating_point_v<U>) return static_cast<U>(v.float_value);
  else if constexpr (std::is_same_v<U, const char*>) return v.null_string ? static_cast<const char*>(nullptr) : v.text.c_str();
  else if constexpr (std::is_same_v<U, std::string_view>) return std::string_view(v.text);
  else return static_cast<const std::string&>(v.text);
}

template <class R, class... A, std::size_t... I>
std::optional<log::Arg> call(R (*fn)(A...), std::vector<Value>& values, std::index_sequence<I...>) {
  if constexpr (std::is_void_v<R>) {
    fn(value_as<A>(values[I])...);
    return std::nullopt;
  } else {
    R result = fn(value_as<A>(values[I])...);
    if constexpr (requires { log::detail::to_arg(result); }) {
      log::Arg a = log::detail::to_arg(result);
      a.name = "return";
      return a;
    } else {
      return std::nullopt;
    }
  }
}

}  // namespace detail

template <class R, class... A>
Replayable make_replayable(std::string name, R (*fn)(A...), std::vector<std::string> names = {}) {
  Replayable r;
  r.name = std::move(name);
  r.params = {detail::param_kind<A>()...};
  r.names = std::move(names);
  r.invoke = [fn](std::vector<Value>& values) { return detail::call(fn, values, std::index_sequence_for<A...>{}); };
  return r;
}
// The object MATE_REPLAYABLE defines: registers at static-initialisation time.
struct Registration {
  template <class F>
  Registration(const char* name, F fn, std::initializer_list<const char*> names = {}) {
    register_function(make_replayable(name, fn, std::vector<std::string>(names.begin(), names.end())));
  }
};

}  // namespace mate::replay

#define MATE_REPLAY_CONCAT2_(a, b) a##b
#define MATE_REPLAY_CONCAT_(a, b) MATE_REPLAY_CONCAT2_(a, b)
// MATE_REPLAYABLE("name", &function [, "param name", ...]);
#define MATE_REPLAYABLE(name, fn, ...)                                                               \
  [[maybe_unused]] static const ::mate::replay::Registration MATE_REPLAY_CONCAT_(mate_replayable_, \
                                                                                  __COUNTER__)(    \
      name, fn __VA_OPT__(, {__VA_ARGS__}))
