// DLTensors over host memory for tests: a view of bytes the test owns, and an f32 tensor that
// owns its values, shape and strides. Header-only, so only tests that build tensors (and link
// mate::tensor) depend on the tensor component.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "mate/tensor/dtype.hpp"

namespace mate::testing {

// A DLTensor over `data` (not owned). `shape` and `strides` must outlive it; no strides means
// compact row-major.
inline DLTensor dl_view(const void* data, tensor::ScalarType type, std::vector<std::int64_t>& shape,
                        std::vector<std::int64_t>* strides = nullptr, std::uint64_t byte_offset = 0,
                        DLDevice device = {kDLCPU, 0}) {
  DLTensor t{};
  t.data = const_cast<void*>(data);
  t.device = device;
  t.ndim = static_cast<int>(shape.size());
  t.dtype = tensor::dl_dtype(type);
  t.shape = shape.data();
  t.strides = strides != nullptr && !strides->empty() ? strides->data() : nullptr;
  t.byte_offset = byte_offset;
  return t;
}

// An f32 host tensor owning its values, shape and strides (empty: row-major); `dl` points into
// them, hence no copies.
struct F32Tensor {
  std::vector<float> data;
  std::vector<std::int64_t> shape, strides;
  DLTensor dl;
  F32Tensor(std::vector<float> values, std::vector<std::int64_t> shape_, std::vector<std::int64_t> strides_ = {},
            std::uint64_t byte_offset = 0)
      : data(std::move(values)), shape(std::move(shape_)), strides(std::move(strides_)),
        dl(dl_view(data.data(), tensor::ScalarType::F32, shape, &strides, byte_offset)) {}
  F32Tensor(const F32Tensor&) = delete;
  F32Tensor& operator=(const F32Tensor&) = delete;
};

}  // namespace mate::testing
