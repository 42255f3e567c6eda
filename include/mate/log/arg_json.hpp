// mate/log/arg_json.hpp — the one JSON form of a logged argument (docs/reference/argument-schema.md).
//
// The JSON log (MATE_LOGFORMAT=json), a dump's call.json and replay's reader all use these two
// functions, so an argument is written one way everywhere and read back whole: kind and type,
// the value (unsigned integers as kind "uint"; NaN and infinities as "nan", "inf", "-inf";
// strings that are not UTF-8 get U+FFFD when the document is dumped with
// error_handler_t::replace), enum labels, list items, and a tensor's dtype, shape, strides,
// byte offset, device, contiguity, address range "va" and byte count. What only one writer adds
// stays outside: level-5 "stats" (the log), "file"/"key"/"error" (dumps; read back into Arg's
// fields of those names).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "mate/log/arg.hpp"

namespace mate::log {

// An argument object that does not follow the schema; the message names the field.
class ArgSchemaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "none", "bool", "int", "uint", "float", "str", "enum", "tensor", "list".
const char* kind_name(Arg::Kind kind) noexcept;
std::optional<Arg::Kind> kind_named(std::string_view name) noexcept;

// Called for every tensor argument (list items included) with its JSON object, to add what only
// one writer records.
using TensorFieldsHook = std::function<void(const Arg& tensor_arg, nlohmann::ordered_json& object)>;

// The JSON object of `arg` (and of its list items).
nlohmann::ordered_json arg_to_json(const Arg& arg, const TensorFieldsHook& add = {});

// The argument an object written by arg_to_json describes (a tensor's `data` is its recorded
// address: see Arg::tensor). Also reads "file", "key" and "error". Throws ArgSchemaError.
// `max_depth` bounds list nesting (damaged or hostile files).
Arg arg_from_json(const nlohmann::json& object, int max_depth = 16);

}  // namespace mate::log
