// The argument schema, both directions (mate/log/arg_json.hpp; docs/reference/argument-schema.md).
#include "mate/log/arg_json.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "mate/core/json_integer.hpp"

namespace mate::log {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::pair<Arg::Kind, const char*> kKinds[] = {
    {Arg::Kind::None, "none"},     {Arg::Kind::Bool, "bool"}, {Arg::Kind::Int, "int"},
    {Arg::Kind::UInt, "uint"},     {Arg::Kind::Float, "float"}, {Arg::Kind::String, "str"},
    {Arg::Kind::Enum, "enum"},     {Arg::Kind::Tensor, "tensor"}, {Arg::Kind::List, "list"},
};

std::string hex(std::uintptr_t v) { return fmt::format("{:#x}", v); }

ordered_json float_json(const Arg& a) {
  if (std::isnan(a.float_value)) return "nan";
  if (std::isinf(a.float_value)) return a.float_value > 0 ? "inf" : "-inf";
  // f32 as a float, so that it prints as the shortest text that reads back to the same float.
  if (a.type == "f32") return static_cast<float>(a.float_value);
  return a.float_value;
}

void tensor_fields(const Arg& a, ordered_json& j) {
  if (!a.tensor) return;  // read back without its layout (see tensor_meta)
  const tensor::TensorView v = a.tensor->view();
  const tensor::Layout layout = v.layout();
  const tensor::VaRange va = v.va_range(layout.extent);
  j["dtype"] = tensor::dtype_name(v.dtype());
  if (v.has_dims()) {
    j["shape"] = v.shape();
    j["strides"] = v.strides();
  } else {
    j["shape"] = nullptr;  // none to read (a negative ndim, a null shape pointer)
    j["ndim"] = v.ndim();
  }
  j["byte_offset"] = v.byte_offset();
  j["device"] = tensor::device_name(v.device());
  if (layout.error != nullptr) {  // no range: nothing was read through it
    j["layout_error"] = layout.error;
    j["data"] = hex(reinterpret_cast<std::uintptr_t>(v.dl().data));
    return;
  }
  j["contiguous"] = v.is_contiguous(layout);
  j["va"] = {hex(va.lo), hex(va.hi)};
  j["bytes"] = va.size();
}

// ---- reading ----

[[noreturn]] void bad(const std::string& what) { throw ArgSchemaError(what); }

const json& field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) bad(std::string("missing field \"") + key + "\"");
  return *it;
}

std::string string_field(const json& j, const char* key) {
  const json& v = field(j, key);
  if (!v.is_string()) bad(std::string(key) + ": expected a string, found " + v.dump(-1, ' ', false, json::error_handler_t::replace));
  return v.get<std::string>();
}

std::string optional_string(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

template <class T>
T integer_field(const json& j, const char* key) {
  const json& v = field(j, key);
  if (const core::JsonInteger<T> n = core::json_integer<T>(v)) return n.value;
  bad(std::string(key) + ": expected an integer from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
      std::to_string(std::numeric_limits<T>::max()) + ", found " + v.dump(-1, ' ', false, json::error_handler_t::replace));
}

double float_field(const json& j, const char* key) {
  const json& v = field(j, key);
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {  // non-finite values are written as text
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  bad(std::string(key) + ": expected a number, \"nan\", \"inf\" or \"-inf\", found " +
      v.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::vector<std::int64_t> integer_list(const json& j, const char* key) {
  const json& v = field(j, key);
  if (!v.is_array()) bad(std::string(key) + ": expected a list of integers");
  std::vector<std::int64_t> out;
  for (const json& x : v) {
    const core::JsonInteger<std::int64_t> n = core::json_integer<std::int64_t>(x);
    if (n.fault == core::JsonIntegerFault::NotAnInteger) bad(std::string(key) + ": expected a list of integers");
    if (!n) bad(std::string(key) + ": a value exceeds 64 bits");
    out.push_back(n.value);
  }
  return out;
}

// "0x7f12..." as arg_to_json writes addresses, or a plain integer.
std::optional<std::uintptr_t> address(const json& j) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (!j.is_string()) return std::nullopt;
  const std::string& s = j.get_ref<const std::string&>();
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return std::nullopt;
  std::uintptr_t v = 0;
  auto [end, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

constexpr int kMaxRank = 64;

// A layout whose element count or byte extent does not fit in 64 bits, or with a negative
// dimension, is damage (TensorView would describe it as touching no bytes).
void check_layout(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides, DLDataType type) {
  DLTensor t{};
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.shape = const_cast<std::int64_t*>(shape.data());
  t.strides = const_cast<std::int64_t*>(strides.data());
  t.dtype = type;
  if (const char* error = tensor::TensorView(t).layout().error) bad(error);
}

// The tensor's metadata, when the object carries its layout (call.json always did; a tensor
// recorded as absent or not saved may not). data is the recorded address of element 0. A layout
// recorded as invalid (arg_to_json's "layout_error", with "data" instead of "va") is kept as it
// was: its TensorView describes no memory.
std::optional<tensor::TensorMeta> tensor_meta(const json& j) {
  if (!j.contains("dtype") || !j.contains("shape") || j["shape"].is_null()) return std::nullopt;
  const bool recorded_invalid = j.contains("layout_error");
  const std::string dtype = string_field(j, "dtype");
  const std::optional<DLDataType> type = tensor::dtype_named(dtype);
  if (!type) bad("dtype: unknown dtype \"" + dtype + "\"");
  std::vector<std::int64_t> shape = integer_list(j, "shape");
  std::vector<std::int64_t> strides = j.contains("strides") ? integer_list(j, "strides") : tensor::contiguous_strides(shape);
  if (shape.size() != strides.size()) bad("shape and strides have different lengths");
  if (shape.size() > static_cast<std::size_t>(kMaxRank)) bad("rank " + std::to_string(shape.size()) + " exceeds " + std::to_string(kMaxRank));
  if (!recorded_invalid) check_layout(shape, strides, *type);
  DLDevice device{kDLCPU, 0};
  if (j.contains("device")) {
    const std::string name = string_field(j, "device");
    const std::optional<DLDevice> d = tensor::device_named(name);
    if (!d) bad("device: unknown device \"" + name + "\"");
    device = *d;
  }
  DLTensor t{};
  t.dtype = *type;
  t.device = device;
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.shape = shape.data();
  t.strides = strides.data();
  t.byte_offset = j.contains("byte_offset") ? integer_field<std::uint64_t>(j, "byte_offset") : 0;
  // The recorded address: va.lo is element 0 plus the extent's begin (which does not depend on
  // data). A range that does not match the layout is not this tensor's: data stays null.
  if (recorded_invalid) {
    if (auto data = j.find("data"); data != j.end())
      if (const auto a = address(*data)) t.data = reinterpret_cast<void*>(*a);
    // Only a layout that describes no memory may say so: one that does is read like any other.
    tensor::TensorMeta meta(t);
    if (meta.view().layout().error == nullptr) bad("layout_error on a layout that describes memory");
    return meta;
  }
  if (auto va = j.find("va"); va != j.end() && va->is_array() && va->size() == 2) {
    const auto lo = address((*va)[0]), hi = address((*va)[1]);
    const tensor::ByteExtent e = tensor::TensorView(t).extent();
    if (lo && hi && *lo <= *hi && static_cast<std::uintptr_t>(e.size()) == *hi - *lo)
      t.data = reinterpret_cast<void*>(*lo - static_cast<std::uintptr_t>(e.begin) - t.byte_offset);
  }
  return tensor::TensorMeta(t);
}

}  // namespace

const char* kind_name(Arg::Kind kind) noexcept {
  for (const auto& [k, name] : kKinds)
    if (k == kind) return name;
  return "none";
}

std::optional<Arg::Kind> kind_named(std::string_view name) noexcept {
  for (const auto& [k, n] : kKinds)
    if (name == n) return k;
  return std::nullopt;
}

ordered_json arg_to_json(const Arg& a, const TensorFieldsHook& add) {
  ordered_json j;
  j["name"] = a.name;
  j["kind"] = kind_name(a.kind);
  j["type"] = a.type;
  switch (a.kind) {
    case Arg::Kind::None: break;
    case Arg::Kind::Bool: j["value"] = a.bool_value; break;
    case Arg::Kind::Int: j["value"] = a.int_value; break;
    case Arg::Kind::UInt: j["value"] = a.uint_value; break;
    case Arg::Kind::Float: j["value"] = float_json(a); break;
    case Arg::Kind::String: j["value"] = a.text; break;
    case Arg::Kind::Enum:
      j["value"] = a.int_value;
      if (!a.text.empty()) j["label"] = a.text;
      break;
    case Arg::Kind::List: {
      ordered_json items = ordered_json::array();
      for (const Arg& item : a.items) items.push_back(arg_to_json(item, add));
      j["items"] = std::move(items);
      break;
    }
    case Arg::Kind::Tensor:
      tensor_fields(a, j);
      if (add) add(a, j);
      break;
  }
  return j;
}

Arg arg_from_json(const json& j, int max_depth) {
  if (!j.is_object()) bad("an argument is not a JSON object");
  Arg a;
  a.name = string_field(j, "name");
  const std::string kind = string_field(j, "kind");
  const std::optional<Arg::Kind> k = kind_named(kind);
  if (!k) bad("argument " + a.name + " has unknown kind \"" + kind + "\"");
  a.kind = *k;
  a.type = optional_string(j, "type");
  a.error = optional_string(j, "error");
  switch (a.kind) {
    case Arg::Kind::None: break;
    case Arg::Kind::Bool: {
      const json& v = field(j, "value");
      if (!v.is_boolean()) bad("value: expected true or false, found " + v.dump(-1, ' ', false, json::error_handler_t::replace));
      a.bool_value = v.get<bool>();
      break;
    }
    case Arg::Kind::Int: a.int_value = integer_field<std::int64_t>(j, "value"); break;
    case Arg::Kind::UInt: a.uint_value = integer_field<std::uint64_t>(j, "value"); break;
    case Arg::Kind::Float: a.float_value = float_field(j, "value"); break;
    case Arg::Kind::String: a.text = string_field(j, "value"); break;
    case Arg::Kind::Enum:
      a.int_value = integer_field<std::int64_t>(j, "value");
      a.text = optional_string(j, "label");
      break;
    case Arg::Kind::List: {
      if (max_depth <= 0) bad("arguments nested deeper than 16 lists");
      const json& items = field(j, "items");
      if (!items.is_array()) bad("items: expected a list");
      for (const json& item : items) a.items.push_back(arg_from_json(item, max_depth - 1));
      break;
    }
    case Arg::Kind::Tensor:
      a.file = optional_string(j, "file");
      a.key = optional_string(j, "key");
      a.tensor = tensor_meta(j);
      if (a.error.empty()) {  // a tensor that describes no memory says so where the writer gave no error
        const char* invalid = a.tensor ? a.tensor->view().layout().error : nullptr;
        if (invalid != nullptr) a.error = std::string("invalid layout: ") + invalid;
        else if (!a.tensor && j.contains("layout_error")) a.error = "invalid layout: " + optional_string(j, "layout_error");
      }
      break;
  }
  return a;
}

}  // namespace mate::log
