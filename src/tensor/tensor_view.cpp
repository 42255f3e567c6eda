// Layout arithmetic of a DLTensor: strides, contiguity, extent, VA range.
#include "mate/tensor/tensor_view.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace mate::tensor {

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = step;
    step *= shape[i];
  }
  return s;
}

std::int64_t TensorView::stride(int i) const noexcept {
  if (t_->strides != nullptr) return t_->strides[i];
  std::int64_t step = 1;
  for (int d = t_->ndim - 1; d > i; --d) step *= t_->shape[d];
  return step;
}

std::vector<std::int64_t> TensorView::shape() const {
  return std::vector<std::int64_t>(t_->shape, t_->shape + t_->ndim);
}

std::vector<std::int64_t> TensorView::strides() const {
  std::vector<std::int64_t> s(static_cast<std::size_t>(t_->ndim));
  for (int i = 0; i < t_->ndim; ++i) s[static_cast<std::size_t>(i)] = stride(i);
  return s;
}

std::int64_t TensorView::numel() const noexcept {
  std::int64_t n = 1;
  for (int i = 0; i < t_->ndim; ++i) n *= t_->shape[i];
  return n;
}

bool TensorView::is_contiguous() const noexcept {
  if (t_->strides == nullptr || numel() == 0) return true;
  std::int64_t expected = 1;
  for (int i = t_->ndim - 1; i >= 0; --i) {
    if (t_->shape[i] != 1 && t_->strides[i] != expected) return false;
    expected *= t_->shape[i];
  }
  return true;
}

ByteExtent TensorView::extent() const noexcept {
  if (numel() == 0) return {};
  std::int64_t lo = 0, hi = 0;  // element offsets of the first and last touched elements
  for (int i = 0; i < t_->ndim; ++i) {
    std::int64_t reach = (t_->shape[i] - 1) * stride(i);
    (reach < 0 ? lo : hi) += reach;
  }
  auto es = static_cast<std::int64_t>(element_size());
  return {lo * es, (hi + 1) * es};
}

VaRange TensorView::va_range() const noexcept {
  ByteExtent e = extent();
  std::uintptr_t o = origin();
  return {o + static_cast<std::uintptr_t>(e.begin), o + static_cast<std::uintptr_t>(e.end)};
}

TensorMeta::TensorMeta(const DLTensor& t) : t_(t) {
  if (t.ndim < 0) throw std::invalid_argument("DLTensor ndim is " + std::to_string(t.ndim) + " (accepted: 0 or more)");
  const auto n = static_cast<std::size_t>(t.ndim);
  if (t.ndim > kInlineDims) heap_.resize(2 * n);
  std::int64_t* dims = this->dims();
  const TensorView v(t);
  for (int i = 0; i < t.ndim; ++i) {
    dims[i] = v.shape(i);
    dims[n + static_cast<std::size_t>(i)] = v.stride(i);  // compact ones when DLPack's are NULL
  }
  repoint();
}

TensorMeta& TensorMeta::operator=(const TensorMeta& other) {
  if (this == &other) return *this;
  t_ = other.t_;
  std::memcpy(inline_, other.inline_, sizeof inline_);
  heap_ = other.heap_;
  repoint();
  return *this;
}

void TensorMeta::repoint() noexcept {
  const auto n = static_cast<std::size_t>(t_.ndim);
  t_.shape = n == 0 ? nullptr : dims();
  t_.strides = n == 0 ? nullptr : dims() + n;
}

}  // namespace mate::tensor
