#include "ops/check.hpp"

#include <fmt/format.h>

#include "mate/ops/ops.hpp"
#include "mate/tensor/tensor_view.hpp"

namespace mate::ops::detail {

namespace {

std::string shape_text(const DLTensor& t) {
  std::string s = "[";
  for (int i = 0; i < t.ndim; ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "]";
}

bool same_device(DLDevice a, DLDevice b) { return a.device_type == b.device_type && a.device_id == b.device_id; }

}  // namespace

void Checker::fail(const std::string& message) const {
  throw ArgumentError(fmt::format("mate::ops::{}: {}", function_, message));
}

void Checker::fail(const char* arg, const std::string& message) const {
  throw ArgumentError(fmt::format("mate::ops::{}: argument '{}': {}", function_, arg, message));
}

const DLTensor& Checker::tensor(const char* arg, const DLTensor* t, int ndim) {
  if (t == nullptr) fail(arg, "is a null pointer (a tensor is required)");
  if (t->ndim != ndim)
    fail(arg, fmt::format("has {} dimensions, shape {} (accepted: {} dimensions)", t->ndim, shape_text(*t), ndim));
  if (t->shape == nullptr) fail(arg, fmt::format("has {} dimensions but a null shape pointer", ndim));
  for (int i = 0; i < ndim; ++i)
    if (t->shape[i] < 0) fail(arg, fmt::format("has a negative extent in shape {}", shape_text(*t)));
  if (t->dtype.lanes != 1)
    fail(arg, fmt::format("has {} lanes per element (accepted: 1)", static_cast<int>(t->dtype.lanes)));
  tensor::TensorView v(*t);
  const tensor::Layout layout = v.layout();
  if (layout.error != nullptr) fail(arg, fmt::format("has an invalid layout (shape {}): {}", shape_text(*t), layout.error));
  if (!v.is_contiguous(layout)) {
    auto strides = v.strides();
    std::string s;
    for (auto x : strides) s += (s.empty() ? "" : ", ") + std::to_string(x);
    fail(arg, fmt::format("is not row-major contiguous: shape {}, strides [{}] (accepted: compact row-major "
                          "strides, or NULL strides)",
                          shape_text(*t), s));
  }
  if (layout.numel > 0) {
    if (t->data == nullptr) fail(arg, fmt::format("has a null data pointer and {} elements", layout.numel));
    std::size_t size = v.element_size();
    if (size > 1 && v.origin() % size != 0)
      fail(arg, fmt::format("data + byte_offset = {:#x} is not aligned to its element size of {} bytes", v.origin(),
                            size));
  }
  if (!have_device_) {
    have_device_ = true;
    first_arg_ = arg;
    device_ = t->device;
  } else if (!same_device(device_, t->device)) {
    fail(arg, fmt::format("is on {} but '{}' is on {} (all tensors of a call must be on one device)",
                          tensor::device_name(t->device), first_arg_, tensor::device_name(device_)));
  }
  return *t;
}

void Checker::dtype(const char* arg, const DLTensor& t, std::initializer_list<tensor::ScalarType> accepted) const {
  auto s = tensor::scalar_type(t.dtype);
  std::string list;
  for (auto a : accepted) {
    if (a == s) return;
    list += (list.empty() ? "" : ", ") + tensor::dtype_name(tensor::dl_dtype(a));
  }
  fail(arg, fmt::format("has dtype {} (accepted: {})", tensor::dtype_name(t.dtype), list));
}

void Checker::same_dtype(const char* arg, const DLTensor& t, const char* like_arg, const DLTensor& like) const {
  if (t.dtype.code != like.dtype.code || t.dtype.bits != like.dtype.bits || t.dtype.lanes != like.dtype.lanes)
    fail(arg, fmt::format("has dtype {} but '{}' has {} (they must be the same)", tensor::dtype_name(t.dtype),
                          like_arg, tensor::dtype_name(like.dtype)));
}

void Checker::dim(const char* arg, const DLTensor& t, int d, std::int64_t expected, const std::string& what) const {
  if (t.shape[d] != expected)
    fail(arg, fmt::format("has shape {}: dimension {} is {} but must be {} ({})", shape_text(t), d, t.shape[d],
                          expected, what));
}

void Checker::no_overlap(const char* out_arg, const DLTensor& out, const char* in_arg, const DLTensor& in) const {
  auto a = tensor::TensorView(out).va_range();
  auto b = tensor::TensorView(in).va_range();
  if (a.size() == 0 || b.size() == 0) return;
  if (a.lo < b.hi && b.lo < a.hi)
    fail(out_arg, fmt::format("overlaps input '{}' in memory ([{:#x}, {:#x}) and [{:#x}, {:#x})); the output "
                              "must be a separate buffer",
                              in_arg, a.lo, a.hi, b.lo, b.hi));
}

Placement Checker::placement() const {
  Placement p;
  p.device = device_;
  p.memory = tensor::memory_of(device_);
  if (p.memory == tensor::Memory::Host || p.memory == tensor::Memory::Cuda) return p;
  fail(fmt::format("the tensors are on {}, where the reference library has no kernels (accepted: cpu and "
                   "cuda_host memory for the host kernels, cuda for the CUDA kernels)",
                   tensor::device_name(device_)));
}

InputType Checker::input_type(const DLTensor& t) {
  return tensor::scalar_type(t.dtype) == tensor::ScalarType::BF16 ? InputType::BF16 : InputType::F32;
}

}  // namespace mate::ops::detail
