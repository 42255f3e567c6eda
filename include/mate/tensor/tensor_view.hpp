// mate/tensor/tensor_view.hpp — a non-owning view over DLPack's DLTensor.
//
// Tensors from PyTorch, JAX, CuPy or a C++ library cross into MATE as DLTensor without copies.
// A TensorView answers the layout questions logging, dumps and replay ask: shape, strides
// (DLPack's NULL strides mean compact row-major), contiguity, element count, and the exact byte
// range the tensor touches, which gives the VA range [lo, hi) of the level-3 log. For a packed
// sub-byte type (is_packed: DLPack 1.1's float4_e2m1fn) that range is the elements' bits rounded
// out to whole bytes: two fp4 elements share a byte, and the extent says so.
//
// Contract: the DLTensor (and its shape/strides arrays) must outlive the view. Strides may be
// anything DLPack allows: non-contiguous, zero (broadcast) or negative; the extent accounts for
// all of them. A tensor with zero elements touches no bytes: lo == hi == data + byte_offset.
//
// A DLTensor's layout is not trusted: a negative ndim, a null shape pointer, a negative dimension,
// an element count or a byte extent beyond 64 bits, or an address range that wraps around (for a
// non-null data pointer) is an invalid layout
// (layout().error says which). Such a tensor touches no bytes as far as numel(), extent() and
// va_range() answer (0, empty), so nothing reads memory through it; what describes a tensor (the
// log, dumps, statistics, argument checks) says why instead.
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

// A layout's element count and byte extent, both 0 / empty when `error` is set: why the layout
// cannot describe memory (a static string: "negative dimension in shape", ...).
struct Layout {
  const char* error = nullptr;
  std::int64_t numel = 0;
  ByteExtent extent;
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
  // Whether there are dimensions to read: ndim >= 0, and a shape array when ndim > 0. Without
  // (an invalid layout) shape() and strides() are empty and shape(i) must not be asked.
  bool has_dims() const noexcept { return t_->ndim == 0 || (t_->ndim > 0 && t_->shape != nullptr); }
  std::int64_t shape(int i) const noexcept { return t_->shape[i]; }
  // Stride of dimension i in elements (computed when DLPack's strides are NULL; 0 where that
  // product of later dimensions does not fit 64 bits, which only an invalid or empty layout has,
  // or where there is no shape array).
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

  // Element count, byte extent and whether they are valid, in one pass with checked arithmetic
  // (callers that need more than one of them ask once).
  Layout layout() const noexcept;
  std::int64_t numel() const noexcept { return layout().numel; }
  // Row-major compact: the strides equal the compact ones (dimensions of size 1 excepted).
  // True for a tensor without elements, and for an invalid layout (it touches no bytes).
  bool is_contiguous() const noexcept { return is_contiguous(layout()); }
  // The same, given this tensor's layout().
  bool is_contiguous(const Layout& layout) const noexcept;
  ByteExtent extent() const noexcept { return layout().extent; }
  VaRange va_range() const noexcept { return va_range(layout().extent); }
  // origin() + `e` (an extent of this tensor's, from layout()).
  VaRange va_range(ByteExtent e) const noexcept {
    return {origin() + static_cast<std::uintptr_t>(e.begin), origin() + static_cast<std::uintptr_t>(e.end)};
  }

 private:
  const DLTensor* t_;
};

// An owning copy of a DLTensor's metadata (not its data): shape and strides are kept here, so
// the copy stays valid after the caller's DLTensor is gone. Used to keep arguments for logging.
// A DLTensor without dimensions to read (negative ndim, null shape) is kept without them.
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

// Compact row-major strides for `shape` (0 where one does not fit 64 bits: see stride()).
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape);

}  // namespace mate::tensor
