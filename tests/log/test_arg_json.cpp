// The argument schema (mate/log/arg_json.hpp): values survive the round trip, damage is named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dl_tensor.hpp"
#include "mate/log/arg.hpp"
#include "mate/log/arg_json.hpp"

namespace {

using mate::log::Arg;
using mate::log::arg_from_json;
using mate::log::arg_to_json;
using mate::log::ArgSchemaError;
using json = nlohmann::json;

template <class T>
Arg arg(const T& v, const char* name = "x") {
  Arg a = mate::log::detail::to_arg(v);
  a.name = name;
  return a;
}

Arg round_trip(const Arg& a) { return arg_from_json(json::parse(arg_to_json(a).dump())); }

std::string error_of(const std::string& text) {
  try {
    arg_from_json(json::parse(text));
  } catch (const ArgSchemaError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ArgJson, ScalarsSurviveTheRoundTrip) {
  EXPECT_EQ(round_trip(arg(std::numeric_limits<std::int64_t>::min())).int_value, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(round_trip(arg(~std::uint64_t{0})).uint_value, ~std::uint64_t{0});
  EXPECT_EQ(round_trip(arg(~std::uint64_t{0})).kind, Arg::Kind::UInt);
  EXPECT_TRUE(round_trip(arg(true)).bool_value);
  EXPECT_EQ(static_cast<float>(round_trip(arg(0.1f)).float_value), 0.1f);  // f32 read back is the same float
  EXPECT_EQ(round_trip(arg(1e300)).float_value, 1e300);
  EXPECT_TRUE(std::isnan(round_trip(arg(std::nan(""))).float_value));
  EXPECT_EQ(round_trip(arg(-std::numeric_limits<double>::infinity())).float_value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(arg_to_json(arg(std::numeric_limits<float>::infinity()))["value"], "inf");
  EXPECT_EQ(round_trip(arg(std::string("tab\there"))).text, "tab\there");
  EXPECT_EQ(round_trip(arg(std::vector<int>{1, 2, 3})).items.at(2).int_value, 3);
  EXPECT_EQ(round_trip(arg(std::vector<int>{1, 2, 3})).items.at(2).name, "[2]");
  const Arg none = round_trip(arg(static_cast<const DLTensor*>(nullptr)));
  EXPECT_EQ(none.kind, Arg::Kind::None);
  EXPECT_EQ(none.type, "tensor");
}

TEST(ArgJson, ATensorKeepsItsLayoutDeviceAndAddressRange) {
  mate::testing::F32Tensor t({1, 2, 3, 4, 5, 6}, {3, 2}, {-2, 1}, 16);
  t.dl.device = DLDevice{kDLCUDA, 3};
  const Arg back = round_trip(arg(t.dl));
  ASSERT_TRUE(back.tensor.has_value());
  const mate::tensor::TensorView v = back.tensor->view(), orig(t.dl);
  EXPECT_EQ(v.shape(), orig.shape());
  EXPECT_EQ(v.strides(), orig.strides());
  EXPECT_EQ(v.byte_offset(), 16u);
  EXPECT_EQ(v.device().device_type, kDLCUDA);
  EXPECT_EQ(v.device().device_id, 3);
  EXPECT_EQ(v.va_range().lo, orig.va_range().lo);
  EXPECT_EQ(v.va_range().hi, orig.va_range().hi);
  EXPECT_EQ(v.origin(), orig.origin());
}

TEST(ArgJson, DtypeAndDeviceNamesReadBack) {
  for (int s = 0; s < static_cast<int>(mate::tensor::ScalarType::Unsupported); ++s) {
    const DLDataType t = mate::tensor::dl_dtype(static_cast<mate::tensor::ScalarType>(s));
    const auto back = mate::tensor::dtype_named(mate::tensor::dtype_name(t));
    ASSERT_TRUE(back.has_value()) << mate::tensor::dtype_name(t);
    EXPECT_EQ(back->code, t.code);
    EXPECT_EQ(back->bits, t.bits);
  }
  const DLDataType odd{5, 64, 2};
  ASSERT_TRUE(mate::tensor::dtype_named(mate::tensor::dtype_name(odd)).has_value());
  EXPECT_EQ(mate::tensor::dtype_named(mate::tensor::dtype_name(odd))->lanes, 2);
  for (const DLDevice d : {DLDevice{kDLCPU, 0}, DLDevice{kDLCUDA, 7}, DLDevice{kDLCUDAManaged, 1}, DLDevice{kDLExtDev, 2},
                           DLDevice{kDLCUDAHost, 0}, DLDevice{kDLVulkan, 4}}) {
    const auto back = mate::tensor::device_named(mate::tensor::device_name(d));
    ASSERT_TRUE(back.has_value()) << mate::tensor::device_name(d);
    EXPECT_EQ(back->device_type, d.device_type);
    EXPECT_EQ(back->device_id, d.device_id);
  }
  EXPECT_FALSE(mate::tensor::device_named("gpu:0").has_value());
  EXPECT_FALSE(mate::tensor::dtype_named("float32").has_value());
}

TEST(ArgJson, DamageIsAnErrorNamingTheField) {
  EXPECT_NE(error_of(R"({"name":"x","kind":"complex"})").find("unknown kind \"complex\""), std::string::npos);
  EXPECT_NE(error_of(R"({"kind":"int","value":1})").find("missing field \"name\""), std::string::npos);
  EXPECT_NE(error_of(R"({"name":"x","kind":"uint","value":-1})").find("value: expected an integer from 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"name":"x","kind":"float","value":"lots"})").find("\"nan\", \"inf\" or \"-inf\""), std::string::npos);
  EXPECT_NE(error_of(R"({"name":"x","kind":"bool","value":1})").find("value: expected true or false"), std::string::npos);
  EXPECT_NE(error_of(R"({"name":"x","kind":"tensor","dtype":"f99","shape":[1]})").find("unknown dtype \"f99\""), std::string::npos);
  EXPECT_NE(error_of(R"({"name":"x","kind":"tensor","dtype":"f32","shape":[1],"device":"tpu:0"})").find("unknown device"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"name":"x","kind":"tensor","dtype":"f32","shape":[4611686018427387904,4],"strides":[4,1]})")
                .find("overflow"),
            std::string::npos);
  std::string deep = R"({"name":"x","kind":"int","value":1})";
  for (int i = 0; i < 20; ++i) deep = R"({"name":"l","kind":"list","items":[)" + deep + "]}";
  EXPECT_NE(error_of(deep).find("nested deeper than 16"), std::string::npos);
  // A recorded range that does not fit the layout is not the tensor's: no address.
  const Arg a = arg_from_json(json::parse(
      R"({"name":"x","kind":"tensor","dtype":"f32","shape":[2],"strides":[1],"va":["0x1000","0x2000"]})"));
  EXPECT_EQ(a.tensor->dl().data, nullptr);
}

}  // namespace
