// Layout arithmetic of a DLTensor: strides, contiguity, extent, VA range.
#include "mate/tensor/tensor_view.hpp"

#include <cstring>

namespace mate::tensor {

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size());
  std::int64_t step = 1;
  bool fits = true;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = fits ? step : 0;
    fits = fits && !__builtin_mul_overflow(step, shape[i], &step);
  }
  return s;
}

std::int64_t TensorView::stride(int i) const noexcept {
  if (t_->strides != nullptr) return t_->strides[i];
  if (t_->shape == nullptr) return 0;
  std::int64_t step = 1;
  for (int d = t_->ndim - 1; d > i; --d)
    if (__builtin_mul_overflow(step, t_->shape[d], &step)) return 0;
  return step;
}

std::vector<std::int64_t> TensorView::shape() const {
  if (!has_dims()) return {};
  return std::vector<std::int64_t>(t_->shape, t_->shape + t_->ndim);
}

std::vector<std::int64_t> TensorView::strides() const {
  if (!has_dims()) return {};
  std::vector<std::int64_t> s(static_cast<std::size_t>(t_->ndim));
  for (int i = 0; i < t_->ndim; ++i) s[static_cast<std::size_t>(i)] = stride(i);
  return s;
}

namespace {
Layout invalid(const char* why) noexcept { return Layout{why, 0, {}}; }
}  // namespace

Layout TensorView::layout() const noexcept {
  const int n = t_->ndim;
  if (n < 0) return invalid("negative number of dimensions");
  if (n > 0 && t_->shape == nullptr) return invalid("null shape pointer");
  bool empty = false;
  for (int i = 0; i < n; ++i) {
    if (t_->shape[i] < 0) return invalid("negative dimension in shape");
    empty = empty || t_->shape[i] == 0;
  }
  if (empty) return {};  // no elements: no bytes, whatever the strides say
  // Element offsets of the first and last elements touched, from the last dimension on (where
  // DLPack's strides are NULL, dimension i's stride is the count of the dimensions after it).
  std::int64_t count = 1, lo = 0, hi = 0;
  for (int i = n - 1; i >= 0; --i) {
    const std::int64_t size = t_->shape[i];
    const std::int64_t stride = t_->strides != nullptr ? t_->strides[i] : count;
    if (__builtin_mul_overflow(count, size, &count)) return invalid("element count overflows 64 bits");
    std::int64_t reach = 0;
    if (__builtin_mul_overflow(size - 1, stride, &reach) ||
        __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi))
      return invalid("shape and strides overflow 64 bits");
  }
  // Bytes from element offsets. A sub-byte type (DLPack 1.1: float4_e2m1fn is bits 4, lanes 1) is
  // packed: element k is bits [k*w, (k+1)*w) counted from bit 0 of data + byte_offset, so the
  // touched bytes are those bit ranges rounded out to whole bytes, not one byte per element.
  const std::int64_t w = element_bits(t_->dtype);  // < 2^24
  ByteExtent e;
  std::int64_t size = 0;
  if (!is_packed(t_->dtype)) {
    const std::int64_t es = w / 8;
    if (__builtin_mul_overflow(lo, es, &e.begin) || __builtin_mul_overflow(hi, es, &e.end) ||
        __builtin_add_overflow(e.end, es, &e.end) || __builtin_sub_overflow(e.end, e.begin, &size))
      return invalid("shape and strides overflow 64 bits");
  } else {
    std::int64_t first_bit = 0, end_bit = 0;  // first_bit <= 0 < end_bit
    if (__builtin_mul_overflow(lo, w, &first_bit) || __builtin_add_overflow(hi, 1, &end_bit) ||
        __builtin_mul_overflow(end_bit, w, &end_bit))
      return invalid("shape and strides overflow 64 bits");
    e.begin = first_bit / 8 - (first_bit % 8 != 0);  // floor(first_bit / 8): division truncates
    e.end = end_bit / 8 + (end_bit % 8 != 0);
    if (__builtin_sub_overflow(e.end, e.begin, &size)) return invalid("shape and strides overflow 64 bits");
  }
  if (t_->data != nullptr) {
    // [data + byte_offset + begin, data + byte_offset + end) must be addresses, not wrap around.
    const auto data = reinterpret_cast<std::uintptr_t>(t_->data);
    const std::uintptr_t o = origin();
    const auto below = static_cast<std::uintptr_t>(0) - static_cast<std::uintptr_t>(e.begin);  // e.begin <= 0
    if (o < data || o < below || o + static_cast<std::uintptr_t>(e.end) < o)
      return invalid("data pointer, byte_offset and extent wrap around the address space");
  }
  return {nullptr, count, e};
}

bool TensorView::is_contiguous(const Layout& l) const noexcept {
  if (t_->strides == nullptr || l.error != nullptr || l.numel == 0) return true;
  std::int64_t expected = 1;  // no overflow: a product of dimensions within numel
  for (int i = t_->ndim - 1; i >= 0; --i) {
    if (t_->shape[i] != 1 && t_->strides[i] != expected) return false;
    expected *= t_->shape[i];
  }
  return true;
}

TensorMeta::TensorMeta(const DLTensor& t) : t_(t) {
  if (!TensorView(t).has_dims()) {  // kept as given, without dimensions: its layout() says why
    t_.shape = nullptr;
    t_.strides = nullptr;
    return;
  }
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
  if (t_.ndim <= 0 || t_.shape == nullptr) {  // no dimensions (a scalar), or none to keep
    t_.shape = nullptr;
    t_.strides = nullptr;
    return;
  }
  const auto n = static_cast<std::size_t>(t_.ndim);
  t_.shape = n == 0 ? nullptr : dims();
  t_.strides = n == 0 ? nullptr : dims() + n;
}

}  // namespace mate::tensor
