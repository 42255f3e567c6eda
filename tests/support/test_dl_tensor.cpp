// dl_view and F32Tensor build the DLTensors the component tests pass to MATE.
#include <gtest/gtest.h>

#include "dl_tensor.hpp"
#include "mate/tensor/tensor_view.hpp"

namespace {

using mate::tensor::ScalarType;
using mate::testing::dl_view;
using mate::testing::F32Tensor;

TEST(DlView, DescribesTheBytesGiven) {
  std::vector<std::int32_t> buf(12);
  std::vector<std::int64_t> shape{3, 2}, strides{1, 3};
  DLTensor t = dl_view(buf.data(), ScalarType::I32, shape, &strides, 8, {kDLCUDA, 1});
  EXPECT_EQ(t.data, buf.data());
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.shape, shape.data());
  EXPECT_EQ(t.strides, strides.data());
  EXPECT_EQ(t.byte_offset, 8u);
  EXPECT_EQ(t.device.device_type, kDLCUDA);
  EXPECT_EQ(t.device.device_id, 1);
  EXPECT_EQ(mate::tensor::scalar_type(t.dtype), ScalarType::I32);
}

TEST(DlView, NoStridesIsRowMajorOnTheHost) {
  std::vector<std::uint16_t> buf(6);
  std::vector<std::int64_t> shape{2, 3}, no_strides;
  for (DLTensor t : {dl_view(buf.data(), ScalarType::BF16, shape), dl_view(buf.data(), ScalarType::BF16, shape, &no_strides)}) {
    EXPECT_EQ(t.strides, nullptr);
    EXPECT_EQ(t.byte_offset, 0u);
    EXPECT_EQ(t.device.device_type, kDLCPU);
    EXPECT_EQ(mate::tensor::TensorView(t).strides(), (std::vector<std::int64_t>{3, 1}));
  }
}

TEST(F32Tensor, OwnsWhatItsDlTensorPointsTo) {
  F32Tensor x({1, 2, 3, 4, 5, 6}, {2, 3}, {1, 2}, 4);
  EXPECT_EQ(x.dl.data, x.data.data());
  EXPECT_EQ(x.dl.shape, x.shape.data());
  EXPECT_EQ(x.dl.strides, x.strides.data());
  EXPECT_EQ(x.dl.byte_offset, 4u);
  EXPECT_EQ(mate::tensor::scalar_type(x.dl.dtype), ScalarType::F32);
  F32Tensor y({0, 0}, {2});
  EXPECT_EQ(y.dl.strides, nullptr);
  EXPECT_EQ(y.dl.ndim, 1);
}

}  // namespace
