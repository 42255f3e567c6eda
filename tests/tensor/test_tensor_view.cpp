#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
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

// A DLTensor's fields are the caller's: nonsense in them is an invalid layout, which touches no
// bytes (nothing reads through it) and says why, never a signed overflow.
TEST(TensorView, AnInvalidLayoutSaysWhyAndTouchesNoBytes) {
  float buf[16] = {};
  struct Case {
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;  // empty: DLPack's NULL
    const char* error;
  };
  constexpr std::int64_t k62 = std::int64_t{1} << 62, k40 = std::int64_t{1} << 40;
  const std::int64_t kMin = INT64_MIN, kMax = INT64_MAX;
  const Case cases[] = {
      {{-3, 4}, {}, "negative dimension in shape"},
      {{4, -1}, {1, 4}, "negative dimension in shape"},
      {{k62, 8}, {}, "element count overflows 64 bits"},
      {{k40, k40}, {k40, 1}, "element count overflows 64 bits"},
      {{2, k62, k62}, {}, "element count overflows 64 bits"},
      {{4, 4}, {k62, 1}, "shape and strides overflow 64 bits"},
      {{3}, {kMin}, "shape and strides overflow 64 bits"},
      {{2}, {kMax}, "shape and strides overflow 64 bits"},  // (1 * kMax + 1) elements
      {{k62 / 2}, {1}, "shape and strides overflow 64 bits"},  // 2^61 elements of 4 bytes
  };
  for (const Case& c : cases) {
    std::vector<std::int64_t> shape = c.shape, strides = c.strides;
    DLTensor t = dl_view(buf, ScalarType::F32, shape, strides.empty() ? nullptr : &strides);
    const TensorView v(t);
    SCOPED_TRACE(::testing::PrintToString(c.shape) + " strides " + ::testing::PrintToString(c.strides));
    const Layout l = v.layout();
    ASSERT_NE(l.error, nullptr);
    EXPECT_STREQ(l.error, c.error);
    EXPECT_EQ(l.numel, 0);
    EXPECT_EQ(v.numel(), 0);
    EXPECT_EQ(v.extent().size(), 0);
    EXPECT_EQ(v.va_range().size(), 0u);
    EXPECT_TRUE(v.is_contiguous());
    (void)v.strides();  // defined for any layout (UBSan checks the compact ones)
  }
}

// DLPack 1.1's sub-byte types are packed (element i is bits [i*w, (i+1)*w) from bit 0 of data +
// byte_offset): the extent is the elements' bits rounded out to whole bytes, not a byte each.
TEST(TensorView, PackedSubByteElementsShareBytes) {
  constexpr DLDataType kFp4{17, 4, 1}, kFp4x2{17, 4, 2}, kFp6{15, 6, 1}, kU1{kDLUInt, 1, 1};
  struct Case {
    DLDataType dtype;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;  // empty: DLPack's NULL
    std::int64_t begin, end;
  };
  constexpr std::int64_t k60 = std::int64_t{1} << 60;
  const Case cases[] = {
      {kFp4, {5}, {}, 0, 3},            // 20 bits
      {kFp4, {4}, {}, 0, 2},
      {kFp4, {2, 3}, {}, 0, 3},         // 24 bits
      {kFp4, {2, 3}, {1, 2}, 0, 3},     // transposed: offsets 0..5
      {kFp4, {3}, {-1}, -1, 1},         // offsets -2..0: bits [-8, 4)
      {kFp4, {2}, {3}, 0, 2},           // offsets 0, 3: bits [0, 16)
      {kFp4, {k60}, {}, 0, k60 / 2},    // 2^62 bits fit, 2^59 bytes
      {kFp4x2, {3}, {}, 0, 3},          // two packed lanes a byte (TVM FFI's float4_e2m1fn_x2)
      {kFp6, {4}, {}, 0, 3},            // 24 bits
      {kFp6, {3}, {}, 0, 3},            // 18 bits
      {kU1, {9}, {}, 0, 2},
      {kU1, {1}, {}, 0, 1},
  };
  for (const Case& c : cases) {
    std::vector<std::int64_t> shape = c.shape, strides = c.strides;
    DLTensor t = dl_view(nullptr, ScalarType::U8, shape, strides.empty() ? nullptr : &strides);
    t.dtype = c.dtype;
    SCOPED_TRACE(::testing::PrintToString(c.shape) + " strides " + ::testing::PrintToString(c.strides) + " bits " +
                 std::to_string(c.dtype.bits) + " lanes " + std::to_string(c.dtype.lanes));
    const Layout l = TensorView(t).layout();
    ASSERT_EQ(l.error, nullptr) << l.error;
    EXPECT_EQ(l.extent.begin, c.begin);
    EXPECT_EQ(l.extent.end, c.end);
  }
  EXPECT_TRUE(is_packed(kFp4));
  EXPECT_FALSE(is_packed(kFp4x2));
  // 2^61 fp4 elements are 2^63 bits: beyond 64 bits, an invalid layout.
  std::vector<std::int64_t> huge{2 * k60};
  DLTensor t = dl_view(nullptr, ScalarType::U8, huge);
  t.dtype = kFp4;
  EXPECT_STREQ(TensorView(t).layout().error, "shape and strides overflow 64 bits");
}

TEST(TensorView, AnAddressRangeThatWrapsIsInvalid) {
  std::vector<std::int64_t> shape{4}, back{-1};
  DLTensor high = dl_view(reinterpret_cast<void*>(UINTPTR_MAX - 7), ScalarType::F32, shape);
  EXPECT_STREQ(TensorView(high).layout().error, "data pointer, byte_offset and extent wrap around the address space");
  DLTensor low = dl_view(reinterpret_cast<void*>(8), ScalarType::F32, shape, &back);  // reaches 12 bytes below
  EXPECT_STREQ(TensorView(low).layout().error, "data pointer, byte_offset and extent wrap around the address space");
  DLTensor offset = dl_view(reinterpret_cast<void*>(0x1000), ScalarType::F32, shape, nullptr, UINT64_MAX - 0x800);
  EXPECT_NE(TensorView(offset).layout().error, nullptr);
  // The same layouts with a null data pointer have an extent (replay rebuilds them from it).
  DLTensor unplaced = dl_view(nullptr, ScalarType::F32, shape, &back);
  EXPECT_EQ(TensorView(unplaced).layout().error, nullptr);
  EXPECT_EQ(TensorView(unplaced).extent().begin, -12);
}

// No dimensions to read (a null shape pointer, a negative ndim): an invalid layout, with empty
// shape and strides, kept so by TensorMeta (copies included).
TEST(TensorView, WithoutDimensionsToReadTheLayoutIsInvalid) {
  float x = 0;
  DLTensor t{};
  t.data = &x;
  t.dtype = dl_dtype(ScalarType::F32);
  for (int ndim : {2, -1}) {
    t.ndim = ndim;
    const char* why = ndim > 0 ? "null shape pointer" : "negative number of dimensions";
    const TensorView v(t);
    EXPECT_FALSE(v.has_dims());
    EXPECT_STREQ(v.layout().error, why);
    EXPECT_EQ(v.numel(), 0);
    EXPECT_TRUE(v.shape().empty());
    EXPECT_TRUE(v.strides().empty());
    const TensorMeta meta(t);
    const TensorMeta copy = meta;
    for (const TensorMeta* m : {&meta, &copy}) {
      EXPECT_EQ(m->dl().ndim, ndim);
      EXPECT_EQ(m->dl().shape, nullptr);
      EXPECT_STREQ(m->view().layout().error, why);
    }
  }
}

// Huge dimensions next to a zero are an empty tensor, not an overflow (in any order).
TEST(TensorView, AZeroDimensionMakesAnyShapeEmpty) {
  constexpr std::int64_t k62 = std::int64_t{1} << 62;
  for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{0, k62, k62}, {k62, k62, 0}, {k62, 0, k62}}) {
    DLTensor t = dl_view(reinterpret_cast<void*>(0x1000), ScalarType::F32, shape);
    const Layout l = TensorView(t).layout();
    EXPECT_EQ(l.error, nullptr);
    EXPECT_EQ(l.numel, 0);
    EXPECT_EQ(l.extent.size(), 0);
  }
  // The compact stride of the first dimension does not fit: 0, for the view and the helper.
  std::vector<std::int64_t> shape{0, k62, k62};
  DLTensor t = dl_view(nullptr, ScalarType::F32, shape);
  EXPECT_EQ(TensorView(t).strides(), (std::vector<std::int64_t>{0, k62, 1}));
  EXPECT_EQ(contiguous_strides(shape), (std::vector<std::int64_t>{0, k62, 1}));
}

TEST(TensorView, LayoutOfAValidTensorMatchesItsParts) {
  std::vector<float> buf(10);
  std::vector<std::int64_t> shape{5}, strides{-2};
  DLTensor t = dl_view(buf.data(), ScalarType::F32, shape, &strides, 8 * sizeof(float));
  const Layout l = TensorView(t).layout();
  EXPECT_EQ(l.error, nullptr);
  EXPECT_EQ(l.numel, 5);
  EXPECT_EQ(l.extent.begin, -32);
  EXPECT_EQ(l.extent.end, 4);
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
