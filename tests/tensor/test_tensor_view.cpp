#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mate/tensor/tensor_view.hpp"
#include "dl_tensor.hpp"

namespace {

using namespace mate::tensor;
using mate::testing::dl_view;

TEST(TensorView, NullStridesAreCompactRowMajor) {
  std::vector<float> buf(24);
  std::vector<std::int64_t> shape{2, 3, 4};
  DLTensor t = dl_view(buf.data(), ScalarType::F32, shape);
  TensorView v(t);
  EXPECT_EQ(v.strides(), (std::vector<std::int64_t>{12, 4, 1}));
  EXPECT_EQ(v.numel(), 24);
  EXPECT_TRUE(v.is_contiguous());
  auto r = v.va_range();
  EXPECT_EQ(r.lo, reinterpret_cast<std::uintptr_t>(buf.data()));
  EXPECT_EQ(r.hi, reinterpret_cast<std::uintptr_t>(buf.data() + 24));
}

TEST(TensorView, TransposedIsNotContiguousButCoversTheSameBytes) {
  std::vector<std::uint16_t> buf(12);
  std::vector<std::int64_t> shape{4, 3}, strides{1, 4};
  DLTensor t = dl_view(buf.data(), ScalarType::BF16, shape, &strides);
  TensorView v(t);
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.extent().begin, 0);
  EXPECT_EQ(v.extent().end, 24);
}

TEST(TensorView, NegativeStridesExtendBelowTheOrigin) {
  std::vector<float> buf(10);
  std::vector<std::int64_t> shape{5}, strides{-2};
  // Origin at element 8: touches elements 8, 6, 4, 2, 0.
  DLTensor t = dl_view(buf.data(), ScalarType::F32, shape, &strides, 8 * sizeof(float));
  TensorView v(t);
  EXPECT_EQ(v.origin(), reinterpret_cast<std::uintptr_t>(buf.data() + 8));
  EXPECT_EQ(v.extent().begin, -32);
  EXPECT_EQ(v.extent().end, 4);
  EXPECT_EQ(v.va_range().lo, reinterpret_cast<std::uintptr_t>(buf.data()));
  EXPECT_EQ(v.va_range().hi, reinterpret_cast<std::uintptr_t>(buf.data() + 9));
}

TEST(TensorView, BroadcastZeroStrideTouchesOneRow) {
  std::vector<double> buf(3);
  std::vector<std::int64_t> shape{1000, 3}, strides{0, 1};
  DLTensor t = dl_view(buf.data(), ScalarType::F64, shape, &strides);
  TensorView v(t);
  EXPECT_EQ(v.numel(), 3000);
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.va_range().size(), 24u);
}

TEST(TensorView, SizeOneDimsDoNotBreakContiguityAndEmptyTouchesNothing) {
  std::vector<std::int64_t> shape{3, 1, 2}, strides{2, 77, 1};
  DLTensor t = dl_view(nullptr, ScalarType::I32, shape, &strides);
  EXPECT_TRUE(TensorView(t).is_contiguous());
  std::vector<std::int64_t> empty_shape{0, 5};
  DLTensor e = dl_view(reinterpret_cast<void*>(0x1000), ScalarType::I32, empty_shape, nullptr, 16);
  EXPECT_EQ(TensorView(e).va_range().lo, 0x1010u);
  EXPECT_EQ(TensorView(e).va_range().size(), 0u);
}

TEST(TensorView, ScalarTensorHasOneElement) {
  float x = 1;
  std::vector<std::int64_t> shape;
  DLTensor t = dl_view(&x, ScalarType::F32, shape);
  EXPECT_EQ(TensorView(t).numel(), 1);
  EXPECT_EQ(TensorView(t).va_range().size(), 4u);
}

TEST(Dtype, NamesFollowDLPack11Codes) {
  EXPECT_EQ(dtype_name(DLDataType{kDLFloat, 32, 1}), "f32");
  EXPECT_EQ(dtype_name(DLDataType{kDLBfloat, 16, 1}), "bf16");
  EXPECT_EQ(dtype_name(DLDataType{10, 8, 1}), "f8e4m3");
  EXPECT_EQ(dtype_name(DLDataType{12, 8, 1}), "f8e5m2");
  EXPECT_EQ(dtype_name(DLDataType{6, 8, 1}), "bool");
  EXPECT_EQ(dtype_name(DLDataType{kDLUInt, 8, 1}), "u8");
  EXPECT_EQ(dtype_name(DLDataType{kDLFloat, 32, 4}), "dlpack(code=2,bits=32,lanes=4)");
  for (int s = 0; s < static_cast<int>(ScalarType::Unsupported); ++s) {
    auto type = static_cast<ScalarType>(s);
    EXPECT_EQ(scalar_type(dl_dtype(type)), type);
  }
}

TEST(Dtype, Devices) {
  EXPECT_EQ(device_name({kDLCPU, 0}), "cpu");
  EXPECT_EQ(device_name({kDLCUDA, 1}), "cuda:1");
  EXPECT_EQ(device_name({kDLMUSA, 2}), "musa:2");
  EXPECT_EQ(memory_of({kDLCUDAHost, 0}), Memory::Host);
  EXPECT_EQ(memory_of({kDLMUSA, 0}), Memory::Musa);
  EXPECT_EQ(memory_of({kDLVulkan, 0}), Memory::Other);
}

TEST(TensorMeta, KeepsShapeAfterTheSourceIsGone) {
  TensorMeta meta;
  {
    std::vector<std::int64_t> shape{2, 5};
    DLTensor t = dl_view(reinterpret_cast<void*>(0x2000), ScalarType::F16, shape);
    meta = TensorMeta(t);
    shape.assign({9, 9});
  }
  TensorMeta copy = meta;
  EXPECT_EQ(copy.view().shape(), (std::vector<std::int64_t>{2, 5}));
  EXPECT_EQ(copy.view().strides(), (std::vector<std::int64_t>{5, 1}));
  EXPECT_EQ(copy.view().va_range().size(), 20u);
}

TEST(DtypeNames, ScalarTypeNameIsDtypeNamesSpelling) {
  for (int i = 0; i < static_cast<int>(ScalarType::Unsupported); ++i) {
    const auto s = static_cast<ScalarType>(i);
    EXPECT_EQ(std::string(scalar_type_name(s)), dtype_name(dl_dtype(s))) << i;
    EXPECT_FALSE(scalar_type_name(s).empty()) << i;
  }
  EXPECT_EQ(scalar_type_name(ScalarType::F32), "f32");
  EXPECT_EQ(scalar_type_name(ScalarType::F8E4M3), "f8e4m3");
  EXPECT_EQ(scalar_type_name(ScalarType::Bool), "bool");
  EXPECT_EQ(scalar_type_name(ScalarType::Unsupported), "");
  EXPECT_EQ(dtype_name(DLDataType{kDLFloat, 32, 4}), "dlpack(code=2,bits=32,lanes=4)");
}

}  // namespace
