// mate/core/json_integer.hpp — a JSON value read as an integer type, checked.
//
// nlohmann's get<T>() on a float or on an integer out of T's range converts with a plain cast,
// which is undefined behaviour (the dump readers' fuzz target found 1.5e20 as a device_type).
// Readers of damaged files (call.json, tensor headers) read every integer through this instead.
// It only says what was wrong: each reader words its own error (log's argument schema, dump's
// FieldError).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace mate::core {

enum class JsonIntegerFault { None, NotAnInteger, Negative, OutOfRange };

template <class T>
struct JsonInteger {
  T value{};
  JsonIntegerFault fault = JsonIntegerFault::None;
  explicit operator bool() const noexcept { return fault == JsonIntegerFault::None; }
};

// `v` is an nlohmann::json or ordered_json (a template, so that core needs no JSON library).
// Accepts only JSON integers (signed or unsigned) that fit T: never a float, a string or a bool.
// Negative is reported for a negative value when T is unsigned, OutOfRange for any other value
// that does not fit.
template <class T, class Json>
JsonInteger<T> json_integer(const Json& v) noexcept {
  static_assert(std::is_integral_v<T>);
  if (v.is_number_unsigned()) {
    const auto u = v.template get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return {T{}, JsonIntegerFault::OutOfRange};
    return {static_cast<T>(u)};
  }
  if (v.is_number_integer()) {
    const auto i = v.template get<std::int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (i < 0) return {T{}, JsonIntegerFault::Negative};
      if (static_cast<std::uint64_t>(i) > std::numeric_limits<T>::max()) return {T{}, JsonIntegerFault::OutOfRange};
    } else if (i < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
               i > static_cast<std::int64_t>(std::numeric_limits<T>::max())) {
      return {T{}, JsonIntegerFault::OutOfRange};
    }
    return {static_cast<T>(i)};
  }
  return {T{}, JsonIntegerFault::NotAnInteger};
}

}  // namespace mate::core
