// Replaying dumped Python calls: `python -m mate replay` runs the C++ replay (the `mate replay`
// command, in this process) with a resolver that imports each call's Python function
// (python/mate/_replay.py) and runs it on tensors rebuilt by the C++ core.
#include <pybind11/stl.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "mate/dump/call_record.hpp"
#include "mate/replay/registry.hpp"
#include "mate/tensor/dtype.hpp"
#include "mate/tensor/tensor_view.hpp"
#include "python_values.hpp"

namespace py = pybind11;

namespace mate::python {

namespace {

// A rebuilt tensor as a framework tensor over the same memory (python/mate/_replay.py).
py::object tensor_over(const py::object& helpers, const DLTensor& t) {
  const tensor::TensorView view(t);
  const auto extent = view.extent();  // bytes relative to the data pointer, negative strides included
  const auto data = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset;
  std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  std::vector<std::int64_t> strides(t.ndim);
  for (int i = 0; i < t.ndim; ++i) strides[i] = t.strides != nullptr ? t.strides[i] : tensor::contiguous_strides(shape)[i];
  return helpers.attr("tensor_over")(data + extent.begin, extent.end - extent.begin, -extent.begin,
                                     tensor::dtype_name(t.dtype), shape, strides, tensor::device_name(t.device));
}

replay::Replayable python_replayable(const dump::CallRecord& call) {
  py::object helpers = py::module_::import("mate._replay");
  py::object function = helpers.attr("load_function")(call.python_function, call.python_script);
  std::set<std::string> written;  // tensor arguments the call wrote: compared, so writable
  for (const dump::RecordedArg& out : call.outputs)
    if (out.kind == log::Arg::Kind::Tensor) written.insert(out.name);
  replay::Replayable r;
  r.name = call.function;
  for (const dump::RecordedArg& a : call.inputs) {
    const bool tensor = a.kind == log::Arg::Kind::Tensor || (a.kind == log::Arg::Kind::None && a.type == "tensor");
    r.params.push_back(!tensor ? replay::ParamKind::Value
                       : written.count(a.name) ? replay::ParamKind::WritableTensor
                                               : replay::ParamKind::InputTensor);
    r.names.push_back(a.name);
  }
  // The result must outlive the comparison that reads it (after invoke returns): kept here,
  // released with the Replayable (the caller holds the GIL throughout).
  auto result = std::make_shared<py::object>();
  r.invoke = [helpers, function, names = r.names, result](std::vector<replay::Value>& values) -> std::optional<log::Arg> {
    py::list args;
    for (const replay::Value& v : values) {
      if (v.tensor != nullptr) args.append(tensor_over(helpers, *v.tensor));
      else if (v.recorded != nullptr) args.append(from_arg(*v.recorded));
      else args.append(py::none());
    }
    *result = helpers.attr("call_function")(function, names, args);
    if (result->is_none()) return std::nullopt;
    return to_arg(*result, "return");
  };
  return r;
}

// Bytes per element of the dtype call.json names `dtype` (tensor::element_size).
std::size_t element_size_of(const std::string& dtype) {
  if (const std::optional<DLDataType> t = tensor::dtype_named(dtype)) return tensor::element_size(*t);
  std::string names;
  for (auto s = tensor::ScalarType::F64; s != tensor::ScalarType::Unsupported; s = static_cast<tensor::ScalarType>(static_cast<int>(s) + 1))
    names += (names.empty() ? "" : ", ") + tensor::dtype_name(tensor::dl_dtype(s));
  throw py::value_error("unknown dtype \"" + dtype + "\" (MATE's dtype names: " + names + ")");
}

}  // namespace

void add_replay(py::module_& m) {
  m.def(
      "enable_python_replay", [] { replay::set_python_resolver(&python_replayable); },
      "Lets the replay in this process run calls logged from Python (python -m mate replay)");
  m.def("element_size", &element_size_of, py::arg("dtype"),
        "Bytes per element of a dtype as call.json names it (\"f32\": 4, \"bf16\": 2)");
}

}  // namespace mate::python
