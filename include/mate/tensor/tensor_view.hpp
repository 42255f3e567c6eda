// mate/tensor/tensor_view.hpp — a non-owning view over DLPack's DLTensor.
//
// Tensors from PyTorch, JAX, CuPy or a C++ library cross into MATE as DLTensor without copies.
// A TensorView answers the layout questions logging, dumps and replay ask: shape, strides
// (DLPack's NULL strides mean compact row-major), contiguity, element count, and the exact byte
// range the tensor touches, which gives the VA range [lo, hi) of the level-3 log.
//
// Contract: the DLTensor (and its shape/strides arrays) must outlive the view. Strides may be
// anything DLPack allows: non-contiguous, zero (broadcast) or negative; the extent accounts for
// all of them. A tensor with zero elements touches no bytes: lo == hi == data + byte_offset.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mate/tensor/dtype.hpp"

namespace mate::tensor {

// Byte range touched by a tensor, relative to data + byte_offset: [begin, end). begin is negative
// when some stride is negative.
struct ByteExtent {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const noexcept { return end - begin; }
};

// An absolute address range [lo, hi).
struct VaRange {
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
  std::uintptr_t size() const noexcept { return hi - lo; }
};

class TensorView {
 public:
  explicit TensorView(const DLTensor& t) noexcept : t_(&t) {}

  const DLTensor& dl() const noexcept { return *t_; }
  int ndim() const noexcept { return t_->ndim; }
  std::int64_t shape(int i) const noexcept { return t_->shape[i]; }
  // Stride of dimension i in elements (computed when DLPack's strides are NULL).
  std::int64_t stride(int i) const noexcept;
  std::vector<std::int64_t> shape() const;
  std::vector<std::int64_t> strides() const;
  DLDataType dtype() const noexcept { return t_->dtype; }
  ScalarType scalar_type() const noexcept { return tensor::scalar_type(t_->dtype); }
  DLDevice device() const noexcept { return t_->device; }
  Memory memory() const noexcept { return memory_of(t_->device); }
  std::uint64_t byte_offset() const noexcept { return t_->byte_offset; }
  // data + byte_offset: the address of element (0, ..., 0).
  std::uintptr_t origin() const noexcept {
    return reinterpret_cast<std::uintptr_t>(t_->data) + t_->byte_offset;
  }
  std::size_t element_size() const noexcept { return tensor::element_size(t_->dtype); }

  std::int64_t numel() const noexcept;
  // Row-major compact: the strides equal the compact ones (dimensions of size 1 excepted).
  bool is_contiguous() const noexcept;
  ByteExtent extent() const noexcept;
  VaRange va_range() const noexcept;

 private:
  const DLTensor* t_;
};

// An owning copy of a DLTensor's metadata (not its data): shape and strides are kept here, so
// the copy stays valid after the caller's DLTensor is gone. Used to keep arguments for logging.
class TensorMeta {
 public:
  TensorMeta() = default;
  explicit TensorMeta(const DLTensor& t);
  TensorMeta(const TensorMeta& other) { *this = other; }
  TensorMeta& operator=(const TensorMeta& other);
  TensorView view() const noexcept { return TensorView(t_); }
  const DLTensor& dl() const noexcept { return t_; }

  // Shapes and strides of up to this many dimensions are kept inline: a logged call copies the
  // metadata of each tensor argument, and two allocations per tensor were much of its cost.
  static constexpr int kInlineDims = 8;

 private:
  // Where the shape (then the strides) of t_.ndim dimensions live: inline_ or heap_.
  std::int64_t* dims() noexcept { return t_.ndim > kInlineDims ? heap_.data() : inline_; }
  void repoint() noexcept;
  DLTensor t_{};
  std::int64_t inline_[2 * kInlineDims] = {};  // shape, then strides (ndim <= kInlineDims)
  std::vector<std::int64_t> heap_;             // the same, for more dimensions
};

// Compact row-major strides for `shape`.
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape);

}  // namespace mate::tensor
