// One argument schema: the JSON log and call.json describe the same call's arguments with the
// same objects, and replay's reader gets every field back (mate/log/arg_json.hpp).
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "dl_tensor.hpp"
#include "mate/config.hpp"
#include "mate/dump/call_record.hpp"
#include "mate/dump/dump.hpp"
#include "mate/log/api.hpp"
#include "mate/log/arg_json.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using mate::config::ScopedOverride;
using mate::config::Var;

enum class Mode { Fast = 2, Exact = 7 };
std::string_view to_string(Mode m) { return m == Mode::Fast ? "Fast" : "Exact"; }

void schema_call(const DLTensor* x, const std::vector<const DLTensor*>& xs, double nan, float inf, std::uint64_t big,
                 std::int8_t small, bool flag, Mode mode, const char* odd_text, const DLTensor* absent, DLTensor* out) {
  MATE_API("t.schema", x, xs, nan, inf, big, small, flag, mode, odd_text, absent, out).outputs(MATE_ARGS(out)).run([] {});
}

// Removes what only one writer adds: the log's level-5 statistics, the dump's files.
void strip_writer_fields(json& args) {
  for (json& a : args) {
    for (const char* key : {"stats", "stats_unavailable", "file", "key", "error"}) a.erase(key);
    if (a.contains("items")) strip_writer_fields(a["items"]);
  }
}

std::string fmt_address(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%#lx", static_cast<unsigned long>(reinterpret_cast<std::uintptr_t>(p)));
  return text;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ArgumentSchema : public ::testing::Test {
 protected:
  void SetUp() override {
    overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_LOGLEVEL, "10"));
    overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_LOGFORMAT, "json"));
    overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_LOGDEST, (root_ / "log.jsonl").string()));
    overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_DUMP_DIR, (root_ / "dumps").string()));
    mate::log::reconfigure();
    mate::dump::reconfigure();
  }
  void TearDown() override {
    overrides_.clear();
    mate::log::reconfigure();
    mate::dump::reconfigure();
  }
  // The inputs record of the JSON log.
  json logged_inputs() {
    std::istringstream lines(read_text(root_ / "log.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      json r = json::parse(line);
      if (r["event"] == "inputs") return r["args"];
    }
    ADD_FAILURE() << "no inputs record in the log";
    return json::array();
  }
  std::string call_dir() {
    const auto dirs = mate::dump::find_call_dirs((root_ / "dumps").string());
    EXPECT_EQ(dirs.size(), 1u);
    return dirs.empty() ? "" : dirs.front();
  }

  mate::testing::TempDir tmp_{"mate_schema_test"};
  fs::path root_{tmp_.path};
  std::vector<std::unique_ptr<ScopedOverride>> overrides_;
};

TEST_F(ArgumentSchema, TheJsonLogAndCallJsonDescribeACallWithTheSameObjects) {
  mate::testing::F32Tensor x({1, 2, 3, 4, 5, 6}, {2, 3}), y({7, 8}, {2}), z({1, 2, 3, 4}, {2, 2}, {1, 2}), out({0, 0}, {2});
  schema_call(&x.dl, {&y.dl, &z.dl}, std::nan(""), -std::numeric_limits<float>::infinity(), ~std::uint64_t{0}, -5, true,
              Mode::Exact, "bad \xff utf8", nullptr, &out.dl);
  json logged = logged_inputs();
  json dumped = json::parse(read_text(fs::path(call_dir()) / "call.json"))["inputs"];
  strip_writer_fields(logged);
  strip_writer_fields(dumped);
  ASSERT_EQ(logged.size(), 11u);
  EXPECT_EQ(logged, dumped);
  // Written the call.json way in both: unsigned as uint, non-finite floats as text, non-UTF-8
  // bytes as U+FFFD.
  EXPECT_EQ(logged[4]["kind"], "uint");
  EXPECT_EQ(logged[4]["value"].get<std::uint64_t>(), ~std::uint64_t{0});
  EXPECT_EQ(logged[2]["value"], "nan");
  EXPECT_EQ(logged[3]["value"], "-inf");
  EXPECT_EQ(logged[8]["value"], "bad \xef\xbf\xbd utf8");
  EXPECT_EQ(logged[7]["label"], "Exact");
  EXPECT_EQ(logged[1]["items"][1]["contiguous"], false);
}

TEST_F(ArgumentSchema, ReplaysReaderGetsEveryFieldBackIncludingTheAddressRange) {
  mate::testing::F32Tensor x({1, 2, 3, 4, 5, 6}, {2, 3}), y({7, 8}, {2}), z({1, 2, 3, 4}, {2, 2}, {1, 2}), out({0, 0}, {2});
  schema_call(&x.dl, {&y.dl, &z.dl}, 0.25, 1.5f, 42, -5, false, Mode::Fast, "plain", nullptr, &out.dl);
  const mate::dump::CallRecord call = mate::dump::read_call(call_dir());
  ASSERT_EQ(call.inputs.size(), 11u);
  // Read back and written again, each argument is the object the log wrote.
  json logged = logged_inputs();
  strip_writer_fields(logged);
  for (std::size_t k = 0; k < call.inputs.size(); ++k) {
    json wrapped = json::array({json::parse(mate::log::arg_to_json(call.inputs[k]).dump())});
    strip_writer_fields(wrapped);
    EXPECT_EQ(wrapped[0], logged[k]) << k;
  }
  // The tensor's recorded address range is the one it had.
  const mate::tensor::VaRange va = mate::tensor::TensorView(x.dl).va_range();
  ASSERT_TRUE(call.inputs[0].tensor.has_value());
  EXPECT_EQ(call.inputs[0].tensor->view().va_range().lo, va.lo);
  EXPECT_EQ(call.inputs[0].tensor->view().va_range().hi, va.hi);
  EXPECT_EQ(call.inputs[1].items[1].tensor->view().strides(), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(call.inputs[4].kind, mate::log::Arg::Kind::UInt);
  EXPECT_EQ(call.inputs[4].uint_value, 42u);
  EXPECT_EQ(call.inputs[5].int_value, -5);
  EXPECT_EQ(call.inputs[9].kind, mate::log::Arg::Kind::None);
  EXPECT_EQ(call.inputs[9].type, "tensor");
  EXPECT_FALSE(call.inputs[0].file.empty());
}

// A tensor whose DLTensor describes no memory (here a negative dimension) is described as it was
// given, with why its layout is invalid; nothing is read or saved, and the reader gets it back
// as the same invalid layout, not saved.
TEST_F(ArgumentSchema, AnInvalidLayoutIsDescribedNotSavedAndReadsBack) {
  mate::testing::F32Tensor y({7, 8}, {2}), out({0, 0}, {2});
  std::vector<std::int64_t> negative{2, -3};
  DLTensor bad = mate::testing::dl_view(y.data.data(), mate::tensor::ScalarType::F32, negative);
  schema_call(&bad, {&y.dl}, 0.25, 1.5f, 42, -5, false, Mode::Fast, "plain", nullptr, &out.dl);
  json logged = logged_inputs();
  const json dumped = json::parse(read_text(fs::path(call_dir()) / "call.json"))["inputs"];
  for (const json* args : {static_cast<const json*>(&logged), &dumped}) {
    const json& x = (*args)[0];
    EXPECT_EQ(x["shape"], json::array({2, -3}));
    EXPECT_EQ(x["layout_error"], "negative dimension in shape");
    EXPECT_FALSE(x.contains("va")) << x;
    EXPECT_FALSE(x.contains("file")) << x;
    EXPECT_EQ(x["data"], fmt_address(y.data.data()));
  }
  EXPECT_EQ(dumped[0]["error"], "not saved: invalid layout (negative dimension in shape)");
  EXPECT_FALSE(fs::exists(fs::path(call_dir()) / "inputs" / "00_x.pt"));
  EXPECT_TRUE(dumped[1]["items"][0].contains("file")) << "the other tensors are saved";

  const mate::dump::CallRecord call = mate::dump::read_call(call_dir());
  ASSERT_TRUE(call.inputs[0].tensor.has_value());
  EXPECT_EQ(call.inputs[0].error, "not saved: invalid layout (negative dimension in shape)");
  EXPECT_STREQ(call.inputs[0].tensor->view().layout().error, "negative dimension in shape");
  json again = json::array({json::parse(mate::log::arg_to_json(call.inputs[0]).dump())});
  strip_writer_fields(again);
  strip_writer_fields(logged);
  EXPECT_EQ(again[0], logged[0]);

  // Only a layout that describes no memory may say so: a record whose layout does is damage.
  json lying = dumped[0];
  lying["shape"] = json::array({2, 3});
  lying["strides"] = json::array({3, 1});
  EXPECT_THROW(mate::log::arg_from_json(lying), mate::log::ArgSchemaError);
  // A layout invalid through its address alone (its range would wrap around) reads back as such.
  json wrapping = dumped[0];
  wrapping["shape"] = json::array({4});
  wrapping["strides"] = json::array({1});
  wrapping["data"] = "0xfffffffffffffff8";
  wrapping["layout_error"] = "data pointer, byte_offset and extent wrap around the address space";
  const mate::log::Arg wrapped = mate::log::arg_from_json(wrapping);
  ASSERT_TRUE(wrapped.tensor.has_value());
  EXPECT_STREQ(wrapped.tensor->view().layout().error, "data pointer, byte_offset and extent wrap around the address space");
  // No dimensions recorded (a null shape pointer): read back without a layout, saying why.
  json no_shape = logged[0];
  no_shape["shape"] = nullptr;
  no_shape.erase("strides");
  no_shape["ndim"] = 2;
  no_shape["layout_error"] = "null shape pointer";
  const mate::log::Arg shapeless = mate::log::arg_from_json(no_shape);
  EXPECT_FALSE(shapeless.tensor.has_value());
  EXPECT_EQ(shapeless.error, "invalid layout: null shape pointer");
  EXPECT_NO_THROW((void)mate::log::arg_to_json(shapeless));
}

}  // namespace
