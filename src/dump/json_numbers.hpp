// Strict integer reads from dump metadata (call.json, .mtensor and safetensors headers).
//
// Every integer field goes through these functions: core::json_integer (never nlohmann's
// unchecked get<int>()) accepts only JSON integers that fit the target type, and these throw a
// DumpError naming the field otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mate/core/json_integer.hpp"
#include "mate/dump/tensor_file.hpp"

namespace mate::dump::detail {

// A malformed integer field; the readers add the file's name.
struct FieldError : DumpError {
  using DumpError::DumpError;
};

template <class T>
T integer_field(const nlohmann::json& v, const std::string& field) {
  const core::JsonInteger<T> n = core::json_integer<T>(v);
  switch (n.fault) {
    case core::JsonIntegerFault::None: return n.value;
    case core::JsonIntegerFault::Negative: throw FieldError(field + ": " + v.dump() + " is negative");
    case core::JsonIntegerFault::OutOfRange: throw FieldError(field + ": " + v.dump() + " is out of range");
    case core::JsonIntegerFault::NotAnInteger: break;
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
