// Strict integer reads from dump metadata (call.json, .mtensor and safetensors headers).
//
// nlohmann's get<int>() on a JSON float converts it with a plain cast, which is undefined
// behaviour when the value is out of range (the readers' fuzz target found 1.5e20 as a
// device_type). Readers of damaged files must never do that: every integer field goes through
// these functions, which accept only JSON integers that fit the target type and otherwise throw
// a DumpError naming the field.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mate/dump/tensor_file.hpp"

namespace mate::dump::detail {

// A malformed integer field; the readers add the file's name.
struct FieldError : DumpError {
  using DumpError::DumpError;
};

template <class T>
T integer_field(const nlohmann::json& v, const std::string& field) {
  static_assert(std::is_integral_v<T>);
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
      throw FieldError(field + ": " + std::to_string(u) + " is out of range");
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (i < 0) throw FieldError(field + ": " + std::to_string(i) + " is negative");
      if (static_cast<std::uint64_t>(i) > std::numeric_limits<T>::max())
        throw FieldError(field + ": " + std::to_string(i) + " is out of range");
    } else if (i < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
               i > static_cast<std::int64_t>(std::numeric_limits<T>::max())) {
      throw FieldError(field + ": " + std::to_string(i) + " is out of range");
    }
    return static_cast<T>(i);
  }
  throw FieldError(field + ": expected an integer, found " + v.dump());
}

// j[key] as an integer; a missing key is json::out_of_range, as with at().
template <class T>
T integer_at(const nlohmann::json& j, const std::string& key) {
  return integer_field<T>(j.at(key), key);
}

template <class T>
std::vector<T> integer_list_at(const nlohmann::json& j, const std::string& key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_array()) throw FieldError(key + ": expected a list of integers, found " + v.dump());
  std::vector<T> out;
  out.reserve(v.size());
  for (const auto& item : v) out.push_back(integer_field<T>(item, key));
  return out;
}

}  // namespace mate::dump::detail
