// Python values <-> log::Arg. Tensors are recognised by type (torch.Tensor, numpy.ndarray) once
// their module is imported; nothing here imports torch or numpy itself, so a program that uses
// neither never pays for them.
#include "python_values.hpp"

#include <pybind11/stl.h>

#include <dlpack/dlpack.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mate/tensor/dtype.hpp"

namespace py = pybind11;

namespace mate::python {

namespace {

// A type from a module the program has imported, or None (looked up again until found).
class LateType {
 public:
  LateType(const char* module, const char* name) : module_(module), name_(name) {}
  bool matches(py::handle value) {
    if (!type_) {
      py::dict modules = py::module_::import("sys").attr("modules");
      if (!modules.contains(module_)) return false;
      py::object mod = modules[module_];
      if (!py::hasattr(mod, name_)) return false;
      type_ = mod.attr(name_);
    }
    return py::isinstance(value, type_);
  }
  py::handle type() const { return type_; }

 private:
  const char* module_;
  const char* name_;
  py::object type_;
};

LateType& torch_tensor() {
  static auto* t = new LateType("torch", "Tensor");
  return *t;
}
LateType& torch_dtype() {
  static auto* t = new LateType("torch", "dtype");
  return *t;
}
LateType& numpy_array() {
  static auto* t = new LateType("numpy", "ndarray");
  return *t;
}
LateType& numpy_scalar() {
  static auto* t = new LateType("numpy", "generic");
  return *t;
}
LateType& enum_type() {
  static auto* t = new LateType("enum", "Enum");
  return *t;
}

// torch's dtype names -> MATE's (mate/tensor/dtype.hpp).
const std::unordered_map<std::string_view, std::string_view>& torch_dtype_names() {
  static const auto* names = new std::unordered_map<std::string_view, std::string_view>{
      {"torch.float64", "f64"},         {"torch.float32", "f32"},      {"torch.float16", "f16"},
      {"torch.bfloat16", "bf16"},       {"torch.float8_e4m3fn", "f8e4m3"}, {"torch.float8_e5m2", "f8e5m2"},
      {"torch.int8", "i8"},             {"torch.int16", "i16"},        {"torch.int32", "i32"},
      {"torch.int64", "i64"},           {"torch.uint8", "u8"},         {"torch.uint16", "u16"},
      {"torch.uint32", "u32"},          {"torch.uint64", "u64"},       {"torch.bool", "bool"},
      {"torch.complex64", "dlpack(code=5,bits=64,lanes=1)"}, {"torch.complex128", "dlpack(code=5,bits=128,lanes=1)"},
      // Newer torch's narrow floats, with DLPack 1.1's codes (no statistics; dumped as their bytes).
      // float4_e2m1fn_x2 holds two packed fp4 values per element: bits 4, lanes 2, one byte.
      {"torch.float8_e4m3fnuz", "dlpack(code=11,bits=8,lanes=1)"}, {"torch.float8_e5m2fnuz", "dlpack(code=13,bits=8,lanes=1)"},
      {"torch.float8_e8m0fnu", "dlpack(code=14,bits=8,lanes=1)"}, {"torch.float4_e2m1fn_x2", "dlpack(code=17,bits=4,lanes=2)"}};
  return *names;
}

// numpy's typestr kind letter and size -> MATE's dtype name.
std::string numpy_dtype_name(const std::string& typestr) {
  if (typestr.size() < 3) return "";
  const char order = typestr[0], kind = typestr[1];
  const std::string bytes = typestr.substr(2);
  if (order == '>') return "";  // big-endian data: MATE reads little-endian only
  const int bits = std::stoi(bytes) * 8;
  switch (kind) {
    case 'f': return bits == 16 || bits == 32 || bits == 64 ? "f" + std::to_string(bits) : "";
    case 'i': return "i" + std::to_string(bits);
    case 'u': return "u" + std::to_string(bits);
    case 'b': return bits == 8 ? "bool" : "";
    case 'c': return "dlpack(code=5,bits=" + std::to_string(bits) + ",lanes=1)";
  }
  return "";
}

log::Arg as_object(py::handle value, std::string name) {
  log::Arg a;
  a.name = std::move(name);
  a.kind = log::Arg::Kind::String;
  a.type = "object:" + py::str(py::type::of(value).attr("__qualname__")).cast<std::string>();
  std::string text = py::repr(value).cast<std::string>();
  constexpr std::size_t kMaxRepr = 200;  // a log line, not a serialisation
  if (text.size() > kMaxRepr) text = text.substr(0, kMaxRepr) + "...";
  a.text = std::move(text);
  return a;
}

log::Arg tensor_arg(std::string name, const DLDataType& dtype, const DLDevice& device, std::uintptr_t data,
                    std::vector<std::int64_t> shape, std::vector<std::int64_t> strides) {
  DLTensor t{};
  t.data = reinterpret_cast<void*>(data);
  t.device = device;
  t.dtype = dtype;
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.shape = shape.data();
  t.strides = strides.data();
  log::Arg a;
  a.name = std::move(name);
  a.kind = log::Arg::Kind::Tensor;
  a.type = "tensor";
  a.tensor.emplace(t);  // copies shape and strides
  return a;
}

std::optional<log::Arg> torch_tensor_arg(py::handle value, const std::string& name) {
  if (py::str(value.attr("layout")).cast<std::string>() != "torch.strided") return std::nullopt;  // sparse
  const std::string dtype_text = py::str(value.attr("dtype")).cast<std::string>();
  auto named = torch_dtype_names().find(dtype_text);
  if (named == torch_dtype_names().end()) return std::nullopt;
  const std::optional<DLDataType> dtype = tensor::dtype_named(named->second);
  py::object dev = value.attr("device");
  std::string device_text = py::str(dev.attr("type")).cast<std::string>();
  if (!dev.attr("index").is_none()) device_text += ":" + std::to_string(dev.attr("index").cast<int>());
  const std::optional<DLDevice> device = tensor::device_named(device_text);
  if (!dtype || !device) return std::nullopt;
  return tensor_arg(name, *dtype, *device, value.attr("data_ptr")().cast<std::uintptr_t>(),
                    value.attr("shape").cast<std::vector<std::int64_t>>(),
                    value.attr("stride")().cast<std::vector<std::int64_t>>());
}

std::optional<log::Arg> numpy_array_arg(py::handle value, const std::string& name) {
  py::dict info = value.attr("__array_interface__");
  const std::optional<DLDataType> dtype = tensor::dtype_named(numpy_dtype_name(info["typestr"].cast<std::string>()));
  if (!dtype) return std::nullopt;
  auto shape = info["shape"].cast<std::vector<std::int64_t>>();
  std::vector<std::int64_t> strides;
  const auto item = static_cast<std::int64_t>(tensor::element_size(*dtype));
  if (info["strides"].is_none()) {
    strides = tensor::contiguous_strides(shape);
  } else {
    for (std::int64_t bytes : info["strides"].cast<std::vector<std::int64_t>>()) {
      if (bytes % item != 0) return std::nullopt;  // not expressible in elements (DLPack's unit)
      strides.push_back(bytes / item);
    }
  }
  const auto data = info["data"].cast<py::tuple>()[0].cast<std::uintptr_t>();
  return tensor_arg(name, *dtype, DLDevice{kDLCPU, 0}, data, std::move(shape), std::move(strides));
}

log::Arg list_arg(py::handle value, std::string name, const char* type, int depth);

log::Arg to_arg_at(py::handle value, std::string name, int depth) {
  log::Arg a;
  a.name = name;
  if (value.is_none()) {
    a.type = "optional";
    return a;
  }
  if (PyBool_Check(value.ptr())) {
    a.kind = log::Arg::Kind::Bool;
    a.type = "bool";
    a.bool_value = value.cast<bool>();
    return a;
  }
  if (PyLong_Check(value.ptr()) && !enum_type().matches(value)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow == 0) {
      a.kind = log::Arg::Kind::Int;
      a.type = "i64";
      a.int_value = v;
      return a;
    }
    const unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
    if (!PyErr_Occurred()) {
      a.kind = log::Arg::Kind::UInt;
      a.type = "u64";
      a.uint_value = u;
      return a;
    }
    PyErr_Clear();
    return as_object(value, std::move(name));  // beyond 64 bits
  }
  if (PyFloat_Check(value.ptr())) {
    a.kind = log::Arg::Kind::Float;
    a.type = "f64";
    a.float_value = value.cast<double>();
    return a;
  }
  if (PyUnicode_Check(value.ptr())) {
    a.kind = log::Arg::Kind::String;
    a.type = "str";
    a.text = value.cast<std::string>();
    return a;
  }
  if (torch_tensor().matches(value)) {
    if (auto t = torch_tensor_arg(value, name)) return *t;
    return as_object(value, std::move(name));
  }
  if (numpy_array().matches(value)) {
    if (auto t = numpy_array_arg(value, name)) return *t;
    return as_object(value, std::move(name));
  }
  if (torch_dtype().matches(value)) {
    a.kind = log::Arg::Kind::String;
    a.type = "torch.dtype";
    a.text = py::str(value).cast<std::string>();
    return a;
  }
  if (enum_type().matches(value)) {
    a.kind = log::Arg::Kind::Enum;
    a.type = "enum";
    py::object v = value.attr("value");
    if (PyLong_Check(v.ptr())) a.int_value = v.cast<std::int64_t>();
    a.text = py::str(py::type::of(value).attr("__name__")).cast<std::string>() + "." + value.attr("name").cast<std::string>();
    return a;
  }
  if (numpy_scalar().matches(value)) return to_arg_at(value.attr("item")(), std::move(name), depth);
  if (PyTuple_Check(value.ptr())) return list_arg(value, std::move(name), "tuple", depth);
  if (PyList_Check(value.ptr())) return list_arg(value, std::move(name), "list", depth);
  if (PyDict_Check(value.ptr())) return list_arg(value, std::move(name), "dict", depth);
  return as_object(value, std::move(name));
}

log::Arg list_arg(py::handle value, std::string name, const char* type, int depth) {
  constexpr int kMaxDepth = 16;  // as arg_from_json reads back
  if (depth >= kMaxDepth) return as_object(value, std::move(name));
  log::Arg a;
  a.name = std::move(name);
  a.kind = log::Arg::Kind::List;
  a.type = type;
  if (PyDict_Check(value.ptr())) {
    for (auto [key, item] : value.cast<py::dict>())
      a.items.push_back(to_arg_at(item, "[" + py::repr(key).cast<std::string>() + "]", depth + 1));
  } else {
    std::size_t i = 0;
    for (py::handle item : value) a.items.push_back(to_arg_at(item, "[" + std::to_string(i++) + "]", depth + 1));
  }
  return a;
}

}  // namespace

log::Arg to_arg(py::handle value, std::string name) { return to_arg_at(value, std::move(name), 0); }

py::object from_arg(const log::Arg& arg) {
  using K = log::Arg::Kind;
  switch (arg.kind) {
    case K::None: return py::none();
    case K::Bool: return py::bool_(arg.bool_value);
    case K::Int: return py::int_(arg.int_value);
    case K::UInt: return py::int_(arg.uint_value);
    case K::Enum: return py::int_(arg.int_value);  // the class is not recorded: its value
    case K::Float: return py::float_(arg.float_value);
    case K::String:
      if (arg.type == "torch.dtype" && arg.text.starts_with("torch."))
        return py::module_::import("torch").attr(arg.text.substr(6).c_str());
      if (arg.type.starts_with("object:"))
        throw std::runtime_error("argument " + arg.name + " was a " + arg.type.substr(7) +
                                 " object, recorded only as its repr() " + arg.text + ": it cannot be replayed");
      return py::str(arg.text);
    case K::Tensor:
      throw std::runtime_error("argument " + arg.name + " is a tensor inside a list or dict: replay rebuilds tensors passed directly only");
    case K::List: {
      if (arg.type == "dict") {
        py::dict d;
        py::object literal_eval = py::module_::import("ast").attr("literal_eval");
        for (const log::Arg& item : arg.items) {
          const std::string key = item.name.size() >= 2 ? item.name.substr(1, item.name.size() - 2) : item.name;
          d[literal_eval(key)] = from_arg(item);
        }
        return d;
      }
      py::list l;
      for (const log::Arg& item : arg.items) l.append(from_arg(item));
      if (arg.type == "tuple") return py::tuple(l);
      return l;
    }
  }
  return py::none();
}

}  // namespace mate::python
