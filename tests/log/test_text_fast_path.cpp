// The text format's fast path (records rendered straight from the C++ values, no Arg built) must
// write what the general path (Arg lists, taken whenever a hook is installed) writes, for every
// accepted argument type, at levels 3 and 5; and where it gives up (device tensors at level 5,
// many device tensors) the general path takes over with nothing lost.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "dl_tensor.hpp"
#include "log/log_internal.hpp"
#include "mate/core/recent_device_ranges.hpp"
#include "mate/log/api.hpp"
#include "log_to_file.hpp"

namespace {

using mate::testing::dl_view;
using mate::testing::F32Tensor;
using mate::tensor::ScalarType;

enum class Mode { Fast, Exact };
std::string_view to_string(Mode m) { return m == Mode::Fast ? "Fast" : "Exact"; }
enum class Plain : std::int16_t { A = -7 };

struct Wrapped {
  const F32Tensor* t;
};
mate::tensor::TensorView mate_log_value(const Wrapped& w) { return mate::tensor::TensorView(w.t->dl); }

// A hook that does nothing: installing it sends every call through the general path.
struct NoOpHook : mate::log::CallHook {
  void before(const mate::log::CallInfo&, const std::vector<mate::log::Arg>&) override {}
  void after(const mate::log::CallInfo&, const std::vector<mate::log::Arg>&, const mate::log::CallOutcome&) override {}
};

// Every line of `log` with the headers' variable parts (time, pid, tid, sequence number, wall
// time) cut off.
std::string without_headers(const std::string& log) {
  std::string out;
  std::size_t at = 0;
  while (at < log.size()) {
    std::size_t end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(at, end - at);
    if (!line.empty() && line[0] == '[') {
      line = line.substr(line.find("] ") + 2);
      const std::size_t wall = line.find(" (");
      if (line.find(" outputs (") != std::string::npos) line = line.substr(0, wall);
    }
    out += line + "\n";
    at = end + 1;
  }
  return out;
}

class TextFastPath : public ::testing::TestWithParam<int>, protected mate::testing::LogToFile {
 protected:
  TextFastPath() : LogToFile("mate_text_fast_path") {}
  void TearDown() override { restore(); }
};

// One call with an argument of every accepted kind; returns a float (logged as "return").
float every_kind(const F32Tensor& t, const F32Tensor& strided) {
  std::vector<std::int64_t> shape{2, 3};
  const std::int32_t ints[6] = {1, -2, 3, -4, 5, -6};
  DLTensor i32 = dl_view(ints, ScalarType::I32, shape);
  DLTensor f32x4_dl = dl_view(ints, ScalarType::I32, shape);  // a dtype with no name of MATE's own
  f32x4_dl.dtype = DLDataType{kDLFloat, 32, 4};
  const DLTensor* f32x4 = &f32x4_dl;
  std::vector<std::int64_t> negative{2, -3};
  DLTensor bad_dl = dl_view(ints, ScalarType::I32, negative);  // an invalid layout: nothing is read
  const DLTensor* bad = &bad_dl;
  DLTensor no_shape_dl = dl_view(ints, ScalarType::I32, negative);
  no_shape_dl.shape = nullptr;  // no dimensions to read: described, and the arguments after it too
  const DLTensor* no_shape = &no_shape_dl;
  std::vector<const DLTensor*> list{&t.dl, nullptr, &strided.dl};
  std::vector<std::vector<int>> nested{{1, 2}, {}};
  std::array<double, 2> doubles{0.1, -1e300};
  DLManagedTensor managed{};
  managed.dl_tensor = t.dl;
  const DLManagedTensor* managed_ptr = &managed;
  const DLTensor* null_tensor = nullptr;
  const char* null_text = nullptr;
  const char* text = "quote \" backslash \\ tab \t bell \a end";
  std::string owned = "line\nbreak";
  std::optional<int> none;
  std::optional<float> some = 2.5f;
  const std::int8_t i8 = -128;
  const std::uint8_t u8 = 255;
  const std::int16_t i16 = -300;
  const std::uint16_t u16 = 60000;
  const std::int64_t i64 = INT64_MIN;
  const std::uint64_t u64 = UINT64_MAX;
  const unsigned u32 = 7;
  const float tiny = 1e-45f;
  const double big = 1.2345678901234568e17;
  const bool yes = true;
  Wrapped wrapped{&t};
  std::span<const float> floats(t.data.data(), 2);
  mate::tensor::TensorView view(strided.dl);
  return MATE_API("every_kind", t.dl, &i32, f32x4, bad, no_shape, list, nested, doubles, managed_ptr, null_tensor, null_text, text, owned,
                  none, some, std::nullopt, i8, u8, i16, u16, i64, u64, u32, tiny, big, yes, Mode::Exact, Plain::A,
                  wrapped, floats, view, MATE_NAMED("name \"escaped\"\n", 3))
      .outputs(MATE_ARGS(list, owned, MATE_NAMED("sum", 6)))
      .run([&] { return 0.25f; });
}

TEST_P(TextFastPath, WritesWhatTheGeneralPathWrites) {
  configure(GetParam());
  F32Tensor t({1.5f, -2.0f, 0.0f, 3.0f}, {2, 2});
  F32Tensor strided({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {3}, {2});
  every_kind(t, strided);
  const std::string fast = log();
  ASSERT_NE(fast.find("every_kind outputs"), std::string::npos) << fast;

  std::filesystem::remove(path_);
  configure(GetParam());  // a fresh file
  NoOpHook hook;
  mate::log::add_call_hook(&hook);
  every_kind(t, strided);
  mate::log::remove_call_hook(&hook);
  const std::string general = log();

  EXPECT_EQ(without_headers(fast), without_headers(general)) << "fast path:\n" << fast << "general path:\n" << general;
  // Spot checks that the comparison compares something: each kind appears.
  for (const char* expected :
       {"  t.dl: tensor f32 [2, 2] strides [2, 1] cpu contiguous", "  list: list of 3\n    [0]: tensor f32",
        "    [1]: None (tensor)", "  nested: list of 2\n    [0]: list of 2\n      [0]: i32 1\n", "  null_text: None (str)",
        "  text: str \"quote \\\" backslash \\\\ tab \\t bell \\u0007 end\"", "  none: None (optional)",
        "  some: f32 2.5", "  i8: i8 -128", "  u64: u64 18446744073709551615", "  i64: i64 -9223372036854775808",
        "  Mode::Exact: enum Exact (1)", "  Plain::A: enum -7", "  name \"escaped\"\\n: i32 3", "  return: f32 0.25",
        "  sum: i32 6", "  f32x4: tensor dlpack(code=2,bits=32,lanes=4) [2, 3]",
        "  bad: tensor i32 [2, -3] strides [-3, 1] cpu invalid layout (negative dimension in shape): data 0x",
        "  no_shape: tensor i32 ndim 2 cpu invalid layout (null shape pointer): data 0x"}) {
    EXPECT_NE(fast.find(expected), std::string::npos) << expected << "\n" << fast;
  }
  if (GetParam() >= 5) {
    EXPECT_NE(fast.find("    stats: min -2 max 3 mean 0.625 nan 0 inf 0"), std::string::npos) << fast;
  }
  const std::size_t bad_line = fast.find("  bad: ");
  ASSERT_NE(bad_line, std::string::npos);
  EXPECT_EQ(fast.substr(fast.find('\n', bad_line) + 1, 12), "  no_shape: ") << "no statistics line under it";
}

INSTANTIATE_TEST_SUITE_P(Levels, TextFastPath, ::testing::Values(3, 5));

// Which path a call takes shows in when its inputs record is written: by the call object on the
// fast path, by run() on the general one. This test program links mate::dump, whose level-10
// hook is installed from the start: below level 10 it must not send calls the general way.
TEST_F(TextFastPath, IsTakenBelowTheLowestLevelOfTheInstalledHooks) {
  configure(3);
  int x = 1;
  {
    mate::log::ApiCall call = MATE_API("made", x);
    EXPECT_NE(log().find("made inputs\n  x: i32 1\n"), std::string::npos) << log();
    call.run([] {});
  }
  NoOpHook hook;  // acts from level 3
  mate::log::add_call_hook(&hook);
  {
    mate::log::ApiCall call = MATE_API("held", x);
    EXPECT_EQ(log().find("held inputs"), std::string::npos) << log();
    call.run([] {});
    EXPECT_NE(log().find("held inputs\n  x: i32 1\n"), std::string::npos) << log();
  }
  mate::log::remove_call_hook(&hook);
}

// A value whose description throws (here from its mate_log_value).
struct Thrower {
  int v;
};
int mate_log_value(const Thrower& t) {
  if (t.v < 0) throw std::runtime_error("cannot describe this value");
  return t.v;
}

Thrower throws_describing(int a, Thrower t, int c) {
  return MATE_API("throws_describing", a, t, c).run([&] { return Thrower{-2}; });
}

// An argument that throws while described is left out as on the general path (the ones before
// it kept), and a return value that does leaves no half-written line behind.
TEST_F(TextFastPath, AValueThatThrowsWhileDescribedIsLeftOutAsOnTheGeneralPath) {
  configure(3);
  throws_describing(2, Thrower{-1}, 3);
  throws_describing(2, Thrower{1}, 3);
  const std::string fast = log();
  std::filesystem::remove(path_);
  configure(3);
  NoOpHook hook;
  mate::log::add_call_hook(&hook);
  throws_describing(2, Thrower{-1}, 3);
  throws_describing(2, Thrower{1}, 3);
  mate::log::remove_call_hook(&hook);
  EXPECT_EQ(without_headers(fast), without_headers(log()));
  EXPECT_EQ(without_headers(fast),
            "throws_describing inputs\n  a: i32 2\nthrows_describing outputs\n"
            "throws_describing inputs\n  a: i32 2\n  t: i32 1\n  c: i32 3\nthrows_describing outputs\n")
      << fast;
}

struct DeviceTensors {
  std::vector<std::int64_t> shape{4};
  std::vector<DLTensor> dl;
  explicit DeviceTensors(int n) {
    for (int i = 0; i < n; ++i)
      dl.push_back(dl_view(reinterpret_cast<void*>(0x7000000000 + 0x1000 * static_cast<std::uintptr_t>(i)),
                           ScalarType::F32, shape, nullptr, 0, {kDLCUDA, 0}));
  }
};

// At level 3 device tensors are described without reading them, and their ranges are noted for
// device-fault reports once the inputs are written, as the general path notes them; beyond the
// fast path's room for ranges (8) the general path takes the call.
TEST_F(TextFastPath, DeviceTensorRangesAreNotedOnceWhateverThePath) {
  for (int n : {3, 12}) {
    SCOPED_TRACE(n);
    configure(3);
    DeviceTensors tensors(n);
    mate::core::clear_recent_device_ranges();
    MATE_API("on_device", tensors.dl).run([] {});
    const std::string text = log();
    EXPECT_NE(text.find("  tensors.dl: list of " + std::to_string(n)), std::string::npos) << text;
    EXPECT_NE(text.find("cuda:0 contiguous va [0x7000000000, 0x7000000010) 16 bytes"), std::string::npos) << text;
    mate::core::RecentDeviceRange ranges[mate::core::kRecentDeviceRanges];
    ASSERT_EQ(mate::core::recent_device_ranges(ranges), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_STREQ(ranges[i].call, "on_device");
      EXPECT_EQ(ranges[i].hi - ranges[i].lo, 16u);
    }
  }
}

// Python's outputs collector moves its Args into the list; in text mode they are only read, so
// that the collector can run again when the record gives up (a device tensor at level 5).
TEST(TextRecordArgs, AnArgPushedInTextModeIsLeftAsItWas) {
  mate::log::detail::InlineRecordBuffer<256> out;
  mate::log::detail::TextRecord record{&out, 5, true};
  mate::log::ArgList list(record);
  DeviceTensors one(1);
  mate::log::Arg a = mate::log::detail::to_arg(one.dl[0]);
  a.name = "out";
  list.push_back(std::move(a));
  EXPECT_TRUE(record.gave_up);
  EXPECT_EQ(a.name, "out");
  EXPECT_EQ(a.kind, mate::log::Arg::Kind::Tensor);
}

}  // namespace
