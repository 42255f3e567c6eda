// Replaying dumps in-process: the sample kernels are dumped at level 10, then replayed.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "host_memory_device.hpp"
#include "mate/config.hpp"
#include "mate/dump/call_record.hpp"
#include "mate/dump/dump.hpp"
#include "mate/log/api.hpp"
#include "mate/replay/registry.hpp"
#include "mate/replay/replay.hpp"
#include "mate/tensor/dtype.hpp"
#include "mate/tensor/stats.hpp"
#include "dl_tensor.hpp"
#include "recorded_va.hpp"
#include "sample_ops.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using mate::config::ScopedOverride;
using mate::config::Var;
using mate::replay::Outcome;

using F32 = mate::testing::F32Tensor;

// What the layout-checking kernel saw when replayed.
std::vector<std::int64_t> g_seen_strides;
std::uint64_t g_seen_offset = 0;
void layout_probe(const DLTensor* x, DLTensor* out) {
  MATE_API("t.layout_probe", x, out).outputs(MATE_ARGS(out)).run([&] {
    g_seen_strides.assign(x->strides, x->strides + x->ndim);
    g_seen_offset = x->byte_offset;
    const float* base = reinterpret_cast<const float*>(static_cast<const char*>(x->data) + x->byte_offset);
    static_cast<float*>(out->data)[0] = base[0] + base[x->strides[0]] * 10;
  });
}
MATE_REPLAYABLE("t.layout_probe", &layout_probe);

// Copies an i64 tensor; a "changed kernel" adds g_i64_delta to element 0 only (so the only
// difference is there) and to the returned first element.
std::int64_t g_i64_delta = 0;
std::int64_t copy_i64(const DLTensor* x, DLTensor* out) {
  return MATE_API("t.copy_i64", x, out).outputs(MATE_ARGS(out)).run([&] {
    const auto* in = static_cast<const std::int64_t*>(x->data);
    auto* o = static_cast<std::int64_t*>(out->data);
    for (std::int64_t i = 0; i < x->shape[0]; ++i) o[i] = in[i] + (i == 0 ? g_i64_delta : 0);
    return o[0];
  });
}
MATE_REPLAYABLE("t.copy_i64", &copy_i64);

// Negates packed fp4 (DLPack 1.1 float4_e2m1fn: bits 4, lanes 1, two elements a byte, element i
// in bits [4i, 4i + 4)); a "changed kernel" also flips element 3's lowest bit.
constexpr DLDataType kFp4{17, 4, 1};
bool g_fp4_changed = false;
void negate_fp4(const DLTensor* x, DLTensor* out) {
  MATE_API("t.negate_fp4", x, out).outputs(MATE_ARGS(out)).run([&] {
    const auto* in = static_cast<const std::uint8_t*>(x->data);
    auto* o = static_cast<std::uint8_t*>(out->data);
    for (std::int64_t i = 0; i < x->shape[0]; ++i) {
      const int shift = static_cast<int>(i % 2) * 4;
      const int v = ((in[i / 2] >> shift) & 0xf) ^ 0x8 ^ (g_fp4_changed && i == 3 ? 0x1 : 0);
      o[i / 2] = static_cast<std::uint8_t>((o[i / 2] & ~(0xf << shift)) | (v << shift));
    }
  });
}
MATE_REPLAYABLE("t.negate_fp4", &negate_fp4);

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dump(10, {});
    sample::set_bias(0);
  }
  void TearDown() override {
    sample::set_bias(0);
    overrides_.clear();
    mate::log::reconfigure();
    mate::dump::reconfigure();
  }
  void dump(int level, const std::vector<std::pair<Var, std::string>>& extra) {
    overrides_.clear();
    overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_LOGLEVEL, std::to_string(level)));
    overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_LOGDEST, (root_ / "log.txt").string()));
    overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_DUMP_DIR, dumps()));
    for (const auto& [v, value] : extra) overrides_.push_back(std::make_unique<ScopedOverride>(v, value));
    mate::log::reconfigure();
    mate::dump::reconfigure();
  }

 public:  // for helpers outside the fixture
  // Replays with logging off (as `mate replay` runs).
  std::vector<mate::replay::CallResult> replay(const mate::replay::Options& o = {}) {
    dump(0, {});
    return mate::replay::replay_all(dumps(), o);
  }

 protected:
  std::string dumps() const { return (root_ / "dumps").string(); }

  void run_workload() {
    F32 x({-1, -0.5f, 0, 0.5f, 1, 1.5f}, {2, 3}, {1, 2});  // transposed view
    F32 y(std::vector<float>{0, 0, 0, 1, 4, 9, 16, 25}, {2, 3}, {}, 8);
    F32 out(std::vector<float>(6, 0), {2, 3});
    sample::axpy(&x.dl, &y.dl, &out.dl, 2.0f);
    sample::scale_inplace(&out.dl, 0.25, sample::Rounding::Down, "quarter");
    (void)sample::sum(&out.dl);
  }

  mate::testing::TempDir tmp_{"mate_replay_test"};
  fs::path root_{tmp_.path};
  std::vector<std::unique_ptr<ScopedOverride>> overrides_;
};

// Rewrites `dir`/call.json through `edit` (a dump as an older or interrupted writer left it).
template <typename Edit>
void edit_call_json(const std::string& dir, Edit edit) {
  nlohmann::json j;
  {
    std::ifstream in(dir + "/call.json");
    j = nlohmann::json::parse(in);
  }
  edit(j);
  std::ofstream(dir + "/call.json") << j.dump();
}

TEST_F(ReplayTest, UnchangedKernelsPass) {
  run_workload();
  auto results = replay();
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) EXPECT_EQ(r.outcome, Outcome::Passed) << mate::replay::format_line(r);
  EXPECT_EQ(results[0].function, "sample.axpy");
  EXPECT_EQ(results[1].function, "sample.scale_inplace");  // in place: x is input and output
  ASSERT_EQ(results[1].outputs.size(), 1u);
  EXPECT_EQ(results[1].outputs[0].name, "x");
  EXPECT_EQ(results[2].outputs[0].name, "return");
}

TEST_F(ReplayTest, AChangedKernelIsAMismatchWithWhereAndHowMuch) {
  run_workload();
  sample::set_bias(0.5f);
  auto results = replay();
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) EXPECT_EQ(r.outcome, Outcome::Mismatch) << mate::replay::format_line(r);
  const auto& c = results[0].outputs[0];
  EXPECT_EQ(c.name, "out");
  EXPECT_EQ(c.mismatched, 6);
  EXPECT_NEAR(c.max_abs_error, 0.5, 1e-6);
  EXPECT_EQ(c.where.size(), 2u);
  EXPECT_NE(results[0].message.find("max abs error 0.5 at ["), std::string::npos) << results[0].message;
  EXPECT_NE(results[0].message.find("max rel error"), std::string::npos);

  // Within a loose tolerance the same change passes.
  mate::replay::Options loose;
  loose.atol = 1.0;
  loose.rtol = 0;
  auto again = mate::replay::replay_all(dumps(), loose);
  EXPECT_EQ(again[0].outcome, Outcome::Passed) << mate::replay::format_line(again[0]);
}

TEST_F(ReplayTest, ExactAndFilterOptions) {
  run_workload();
  mate::replay::Options o;
  o.filter = "sample.a*";
  o.exact = true;
  auto results = replay(o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Passed);
}

// 2^60 and 2^60 + 1 are the same double: integers must not be compared through one.
TEST_F(ReplayTest, IntegerOutputsAreComparedExactlyAbove2To53) {
  const std::int64_t big = std::int64_t{1} << 60;
  std::vector<std::int64_t> in{big, 7}, out(2, 0), shape{2};
  DLTensor x = mate::testing::dl_view(in.data(), mate::tensor::ScalarType::I64, shape);
  DLTensor o = mate::testing::dl_view(out.data(), mate::tensor::ScalarType::I64, shape);
  g_i64_delta = 0;
  EXPECT_EQ(copy_i64(&x, &o), big);
  g_i64_delta = 1;  // the replayed kernel returns and writes 2^60 + 1
  auto results = replay();
  g_i64_delta = 0;
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Mismatch) << mate::replay::format_line(results[0]);
  ASSERT_EQ(results[0].outputs.size(), 2u);
  const auto& t = results[0].outputs[0];
  EXPECT_EQ(t.name, "out");
  EXPECT_EQ(t.mismatched, 1);
  EXPECT_EQ(t.max_abs_error, 1.0);
  EXPECT_EQ(t.where, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(t.got_exact, "1152921504606846977");
  EXPECT_EQ(t.expected_exact, "1152921504606846976");
  EXPECT_NE(results[0].message.find("(got 1152921504606846977, expected 1152921504606846976)"), std::string::npos)
      << results[0].message;
  const auto& r = results[0].outputs[1];
  EXPECT_EQ(r.name, "return");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(results[0].message.find("return: got 1152921504606846977, expected 1152921504606846976"), std::string::npos)
      << results[0].message;

  // Tolerances are for floating types: a loose one does not hide an integer difference.
  mate::replay::Options loose;
  loose.atol = 10;
  loose.rtol = 0.5;
  g_i64_delta = 1;
  auto again = mate::replay::replay_all(dumps(), loose);
  g_i64_delta = 0;
  EXPECT_EQ(again[0].outcome, Outcome::Mismatch) << mate::replay::format_line(again[0]);
  EXPECT_EQ(again[0].outputs[0].mismatched, 1);

  // The unchanged kernel still passes, with and without --exact.
  EXPECT_EQ(mate::replay::replay_all(dumps())[0].outcome, Outcome::Passed);
  mate::replay::Options exact;
  exact.exact = true;
  EXPECT_EQ(mate::replay::replay_all(dumps(), exact)[0].outcome, Outcome::Passed);
}

// Five packed fp4 elements occupy three bytes: the dump reads and stores those three (a tensor
// that ends at an unreadable page is saved, not refused or read past), and replay compares the
// elements bit by bit.
TEST_F(ReplayTest, PackedSubByteTensorsAreDumpedAsTheirBytesAndComparedBitByBit) {
  const long page = sysconf(_SC_PAGESIZE);
  void* pages = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(pages, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(pages) + page, page, PROT_NONE), 0);
  auto* in = static_cast<std::uint8_t*>(pages) + page - 3;  // the last 3 readable bytes
  in[0] = 0x21, in[1] = 0x43, in[2] = 0x05;                  // elements 1, 2, 3, 4, 5
  std::vector<std::uint8_t> out_bytes(3, 0);
  std::vector<std::int64_t> shape{5};
  DLTensor x{in, {kDLCPU, 0}, 1, kFp4, shape.data(), nullptr, 0};
  DLTensor out{out_bytes.data(), {kDLCPU, 0}, 1, kFp4, shape.data(), nullptr, 0};
  negate_fp4(&x, &out);
  EXPECT_EQ(out_bytes, (std::vector<std::uint8_t>{0xa9, 0xcb, 0x0d}));
  munmap(pages, 2 * page);

  const std::string dir = mate::dump::find_call_dirs(dumps()).at(0);
  const mate::dump::CallRecord call = mate::dump::read_call(dir);
  ASSERT_EQ(call.inputs.size(), 2u);
  ASSERT_EQ(call.inputs[0].error, "");
  EXPECT_EQ(mate::dump::load_tensor(call, call.inputs[0]).data, (std::vector<std::uint8_t>{0x21, 0x43, 0x05}));

  mate::replay::Options exact;
  exact.exact = true;
  auto results = mate::replay::replay_all(dumps(), exact);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Passed) << mate::replay::format_line(results[0]);
  g_fp4_changed = true;
  results = mate::replay::replay_all(dumps(), exact);
  g_fp4_changed = false;
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Mismatch) << mate::replay::format_line(results[0]);
  ASSERT_EQ(results[0].outputs.size(), 1u);
  EXPECT_EQ(results[0].outputs[0].count, 5);
  EXPECT_EQ(results[0].outputs[0].mismatched, 1);
  EXPECT_EQ(results[0].outputs[0].where, (std::vector<std::int64_t>{3}));
  // Without --exact too: a type MATE does not decode has no tolerance, its bits are compared.
  results = replay();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Passed) << mate::replay::format_line(results[0]);
  g_fp4_changed = true;
  results = replay();
  g_fp4_changed = false;
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(mate::replay::format_outcome(results[0]),
            "mismatch: out: 1 of 5 elements differ bit for bit, first at [3] (got 0xd, expected 0xc)");
  EXPECT_TRUE(results[0].outputs.at(0).compared_bits);
}

TEST_F(ReplayTest, TensorsAreRebuiltWithTheirStridesAndOffset) {
  std::vector<float> storage{0, 0, 1, 2, 3, 4, 5, 6};
  F32 x(storage, {3}, {2}, 8);  // elements 1, 3, 5 of storage + 2
  F32 out({0}, {1});
  layout_probe(&x.dl, &out.dl);
  g_seen_strides.clear();
  g_seen_offset = 0;
  auto results = replay();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Passed) << mate::replay::format_line(results[0]);
  EXPECT_EQ(g_seen_strides, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(g_seen_offset, 8u);
}

TEST_F(ReplayTest, SafetensorsDumpsReplayContiguously) {
  dump(10, {{Var::MATE_DUMP_SAFETENSORS, "1"}});
  run_workload();
  auto results = replay();
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) EXPECT_EQ(r.outcome, Outcome::Passed) << mate::replay::format_line(r);
}

TEST_F(ReplayTest, ARaisedCallIsReplayedAndHasNoReference) {
  F32 x({1}, {1}), out({0}, {1});
  EXPECT_THROW(sample::copy_or_throw(&x.dl, &out.dl, true), std::invalid_argument);
  auto results = replay();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::NoReference);
  EXPECT_NE(results[0].message.find("asked to fail"), std::string::npos) << results[0].message;
}

// What a crash inside the body leaves: status inputs_saved. The call still runs on replay.
TEST_F(ReplayTest, AnIncompleteCallRunsAndIsReportedAsNoReference) {
  F32 x({1, 2}, {2}), out({0, 0}, {2});
  sample::copy_or_throw(&x.dl, &out.dl, false);
  const std::string dir = mate::dump::find_call_dirs(dumps()).at(0);
  edit_call_json(dir, [](nlohmann::json& j) {
    j["status"] = "inputs_saved";
    j.erase("outputs");
  });
  auto results = replay();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::NoReference);
  EXPECT_NE(results[0].message.find("did not complete (status inputs_saved)"), std::string::npos) << results[0].message;
}

TEST_F(ReplayTest, ArgumentMismatchesAndUnknownFunctionsArePerCallErrors) {
  F32 x({1}, {1}), out({0}, {1});
  sample::axpy(&x.dl, &x.dl, &out.dl, 1.0f);
  // The registration of sample.axpy names its parameters; a different one is caught.
  auto fake = +[](const DLTensor*, const DLTensor*, DLTensor*, double) {};
  mate::replay::register_function(mate::replay::make_replayable("sample.axpy", fake, {"x", "why", "out", "alpha"}));
  auto results = replay();
  EXPECT_EQ(results[0].outcome, Outcome::Error);
  EXPECT_NE(results[0].message.find("recorded as \"y\", the registration names it \"why\""), std::string::npos) << results[0].message;
  auto wrong_type = +[](const DLTensor*, bool, DLTensor*, float) {};
  mate::replay::register_function(mate::replay::make_replayable("sample.axpy", wrong_type));
  results = mate::replay::replay_all(dumps());
  EXPECT_NE(results[0].message.find("recorded as tensor (tensor), the registered function takes bool"), std::string::npos)
      << results[0].message;
  mate::replay::unregister_function("sample.axpy");
  results = mate::replay::replay_all(dumps());
  EXPECT_NE(results[0].message.find("is not registered"), std::string::npos) << results[0].message;
  mate::replay::register_function(mate::replay::make_replayable("sample.axpy", &sample::axpy, {"x", "y", "out", "alpha"}));
}

TEST_F(ReplayTest, DamagedTensorFilesArePerCallErrorsNamingTheFile) {
  run_workload();
  auto dirs = mate::dump::find_call_dirs(dumps());
  mate::dump::CallRecord c = mate::dump::read_call(dirs[0]);
  const std::string truncated = (fs::path(dirs[0]) / c.inputs[0].file).string();
  fs::resize_file(truncated, 10);
  mate::dump::CallRecord c2 = mate::dump::read_call(dirs[1]);
  const std::string missing = (fs::path(dirs[1]) / c2.inputs[0].file).string();
  fs::remove(missing);
  auto results = replay();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].outcome, Outcome::Error);
  EXPECT_EQ(results[0].message, truncated + ": truncated or not a zip archive: 10 bytes, shorter than a zip's end record");
  EXPECT_EQ(results[1].outcome, Outcome::Error);
  EXPECT_EQ(results[1].message, "cannot open " + missing + ": No such file or directory");
  EXPECT_EQ(results[2].outcome, Outcome::Passed);
}

// A tensor file that is a link (here to an intact copy outside the dump) is not replayed as
// "passed": links inside a dump are not followed. A FIFO in place of one is an error at once,
// not a replay blocked forever.
TEST_F(ReplayTest, LinkedOrSpecialTensorFilesArePerCallErrorsNamingTheFile) {
  run_workload();
  auto dirs = mate::dump::find_call_dirs(dumps());
  mate::dump::CallRecord c = mate::dump::read_call(dirs[0]);
  const fs::path linked = fs::path(dirs[0]) / c.inputs[0].file;
  fs::copy_file(linked, root_ / "elsewhere.pt");
  fs::remove(linked);
  fs::create_symlink(root_ / "elsewhere.pt", linked);
  mate::dump::CallRecord c2 = mate::dump::read_call(dirs[1]);
  const fs::path fifo = fs::path(dirs[1]) / c2.inputs[0].file;
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto results = replay();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].outcome, Outcome::Error);
  EXPECT_NE(results[0].message.find(linked.string() + " is a symbolic link"), std::string::npos) << results[0].message;
  EXPECT_EQ(results[1].outcome, Outcome::Error);
  EXPECT_NE(results[1].message.find(fifo.string() + " is a FIFO, not a regular file"), std::string::npos) << results[1].message;
  EXPECT_EQ(results[2].outcome, Outcome::Passed);
}

// Dumps written before torch.save's format became the default hold `.mtensor` files
// ("tensor_format": "mate"): they are still read and replayed.
TEST_F(ReplayTest, DumpsOfTheEarlierMtensorFormatStillReplay) {
  run_workload();
  for (const std::string& dir : mate::dump::find_call_dirs(dumps())) {
    const mate::dump::CallRecord c = mate::dump::read_call(dir);
    ASSERT_EQ(c.tensor_format, "torch_save");
    for (const auto* args : {&c.inputs, &c.outputs}) {
      for (const auto& a : *args) {
        if (a.kind != mate::log::Arg::Kind::Tensor) continue;
        mate::dump::TensorRecord r = mate::dump::load_tensor(c, a);
        const DLTensor t = r.view_over(reinterpret_cast<std::uintptr_t>(r.data.data()));
        const std::string pt = dir + "/" + a.file;
        ASSERT_TRUE(pt.ends_with(".pt")) << pt;
        ASSERT_TRUE(mate::dump::write_mtensor(pt.substr(0, pt.size() - 3) + ".mtensor", mate::tensor::TensorView(t)).ok());
        fs::remove(pt);
      }
    }
    edit_call_json(dir, [](nlohmann::json& j) {
      j["tensor_format"] = "mate";
      for (const char* phase : {"inputs", "outputs"}) {
        if (!j.contains(phase)) continue;
        for (nlohmann::json& a : j[phase]) {
          if (!a.contains("file")) continue;
          std::string f = a["file"];
          a["file"] = f.substr(0, f.size() - 3) + ".mtensor";
        }
      }
    });
  }
  auto results = replay();
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) EXPECT_EQ(r.outcome, Outcome::Passed) << mate::replay::format_line(r);
}

// What an interrupted write leaves, `.<name>.tmp.<pid>` beside the files (and call.json's own
// temporary), is not part of the dump: replay neither reads nor trips over it.
TEST_F(ReplayTest, LeftoverTemporariesAreNotPartOfTheDump) {
  run_workload();
  auto dirs = mate::dump::find_call_dirs(dumps());
  mate::dump::CallRecord c = mate::dump::read_call(dirs[0]);
  const fs::path file = fs::path(dirs[0]) / c.inputs[0].file;
  std::ofstream(file.parent_path() / ("." + file.filename().string() + ".tmp.12345")) << "MATETNSR half a tensor";
  std::ofstream(fs::path(dirs[0]) / "call.json.tmp.12345.0") << "{\"format\": \"mate-du";
  auto results = replay();
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) EXPECT_EQ(r.outcome, Outcome::Passed) << mate::replay::format_line(r);
}

// What a process killed while writing the inputs leaves (see DumpTest's SIGKILL test): status
// writing_inputs, no input named, a temporary. Replay says so, without reading the temporary.
TEST_F(ReplayTest, ACallKilledWhileWritingItsInputsIsAnErrorSayingSo) {
  run_workload();
  const std::string dir = mate::dump::find_call_dirs(dumps()).at(0);
  edit_call_json(dir, [](nlohmann::json& j) {
    j["status"] = "writing_inputs";
    j.erase("outputs");
    for (nlohmann::json& a : j["inputs"]) {
      if (a["kind"] != "tensor") continue;
      a.erase("file");
      a["error"] = "not saved: the dump stopped while the tensors were being written";
    }
  });
  fs::remove_all(dir + "/outputs");
  fs::remove_all(dir + "/inputs");
  fs::create_directories(dir + "/inputs");
  std::ofstream(dir + "/inputs/.00_x.pt.tmp.4711") << "MATETNSR";
  auto results = replay();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].outcome, Outcome::Error);
  EXPECT_EQ(results[0].message, "the inputs were never completely saved (status writing_inputs)");
  EXPECT_EQ(results[1].outcome, Outcome::Passed) << mate::replay::format_line(results[1]);
}

// `mate replay` runs the calls in the order they were made, not in directory-name order: here
// the calls' directories are renamed so that their names sort in reverse.
TEST_F(ReplayTest, CallsReplayInTheOrderTheyWereMade) {
  run_workload();
  auto dirs = mate::dump::find_call_dirs(dumps());
  ASSERT_EQ(dirs.size(), 3u);
  const char* stamps[] = {"20261122_100000_009", "20261122_100000_005", "20261122_100000_001"};
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    const std::string name = fs::path(dirs[i]).filename().string();
    fs::rename(dirs[i], fs::path(dumps()) / (stamps[i] + name.substr(19)));
  }
  auto results = replay();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].function, "sample.axpy");
  EXPECT_EQ(results[1].function, "sample.scale_inplace");
  EXPECT_EQ(results[2].function, "sample.sum");
  for (const auto& r : results) EXPECT_EQ(r.outcome, Outcome::Passed) << mate::replay::format_line(r);
}

// Each call is reported as it is replayed: named before it runs (so that a crash leaves its
// name), its result as soon as it is done.
TEST_F(ReplayTest, ReplayEachReportsEveryCallAsItGoes) {
  run_workload();
  dump(0, {});
  std::vector<std::string> events;
  mate::replay::Progress progress;
  progress.starting = [&](const std::string& dir, const std::string& function) {
    if (!function.empty()) {
      EXPECT_EQ(mate::dump::read_call(dir).function, function);
    }
    events.push_back("start " + function);
  };
  progress.finished = [&](const mate::replay::CallResult& r) {
    events.push_back("done " + r.function + " " + mate::replay::to_string(r.outcome));
  };
  EXPECT_EQ(mate::replay::replay_each(dumps(), {}, progress), 3u);
  EXPECT_EQ(events, (std::vector<std::string>{"start sample.axpy", "done sample.axpy passed", "start sample.scale_inplace",
                                              "done sample.scale_inplace passed", "start sample.sum", "done sample.sum passed"}));
  // format_line is the name and the outcome, as `mate replay` prints them in two steps.
  auto results = mate::replay::replay_all(dumps());
  EXPECT_EQ(mate::replay::format_line(results[0]),
            mate::replay::format_name(results[0].dir, "sample.axpy") + "  " + mate::replay::format_outcome(results[0]));
  EXPECT_EQ(mate::replay::format_outcome(results[0]), "passed");
  // An unreadable call.json is announced too (without a function), then reported as an error.
  std::ofstream(fs::path(results[0].dir) / "call.json") << "{";
  events.clear();
  mate::replay::replay_each(dumps(), {}, progress);
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0], "start ");
  EXPECT_EQ(events[1], "done  error");
}

// Counts what replay allocates (over the default allocator).
struct CountingAllocator : mate::replay::TensorAllocator {
  std::vector<std::size_t> sizes;
  std::uintptr_t allocate(DLDevice device, std::size_t bytes) override {
    sizes.push_back(bytes);
    return mate::replay::default_allocator().allocate(device, bytes);
  }
  void deallocate(DLDevice device, std::uintptr_t address, std::size_t bytes) noexcept override {
    mate::replay::default_allocator().deallocate(device, address, bytes);
  }
};

mate::tensor::VaRange va_of(const DLTensor& t) { return mate::tensor::TensorView(t).va_range(); }

// The dump writer recorded each tensor's address range (replay shares memory by it).
void expect_recorded(const std::string& dir, const std::map<std::string, mate::tensor::VaRange>& expected) {
  const auto recorded = mate::testing::recorded_va(dir);
  ASSERT_EQ(recorded.size(), expected.size());
  for (const auto& [name, va] : expected) {
    ASSERT_TRUE(recorded.count(name)) << name;
    EXPECT_EQ(recorded.at(name).lo, va.lo) << name;
    EXPECT_EQ(recorded.at(name).hi, va.hi) << name;
  }
}

// An in-place call, op(x, out=x), was one buffer at capture time: replayed on two copies it
// reads inputs its own writes no longer change, and gives another result.
TEST_F(ReplayTest, AnInPlaceCallIsReplayedOnOneBuffer) {
  F32 x({1, 2, 3, 4}, {4});
  sample::prefix_step(&x.dl, &x.dl);
  ASSERT_EQ(x.data, (std::vector<float>{1, 3, 6, 10}));  // in place it is a prefix sum
  const std::string dir = mate::dump::find_call_dirs(dumps()).at(0);
  expect_recorded(dir, {{"x", va_of(x.dl)}, {"out", va_of(x.dl)}});
  CountingAllocator counting;
  mate::replay::Options o;
  o.allocator = &counting;
  auto results = replay(o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Passed) << mate::replay::format_line(results[0]);
  EXPECT_EQ(counting.sizes, (std::vector<std::size_t>{16}));  // one buffer for both
}

// Views of one buffer that overlap share one rebuilt buffer covering both, each at its offset.
TEST_F(ReplayTest, OverlappingViewsShareOneBufferCoveringBoth) {
  F32 x({1, 2, 3, 4, 5}, {4});
  DLTensor out = x.dl;
  out.byte_offset = sizeof(float);  // elements 1..4 of the buffer that x's 0..3 are in
  sample::prefix_step(&x.dl, &out);
  ASSERT_EQ(x.data, (std::vector<float>{1, 1, 2, 3, 5}));  // each result read as the next input
  const std::string dir = mate::dump::find_call_dirs(dumps()).at(0);
  expect_recorded(dir, {{"x", va_of(x.dl)}, {"out", va_of(out)}});
  CountingAllocator counting;
  mate::replay::Options o;
  o.allocator = &counting;
  auto results = replay(o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Passed) << mate::replay::format_line(results[0]);
  EXPECT_EQ(counting.sizes, (std::vector<std::size_t>{20}));  // the union of [0, 16) and [4, 20)

  // Without recorded ranges (dumps from earlier writers) each tensor has its own buffer.
  edit_call_json(dir, [](nlohmann::json& j) {
    for (nlohmann::json& a : j["inputs"]) a.erase("va");
  });
  counting.sizes.clear();
  results = mate::replay::replay_all(dumps(), o);
  EXPECT_EQ(counting.sizes, (std::vector<std::size_t>{16, 16}));
}

// Tensors whose ranges do not overlap stay apart, even when adjacent or on another device.
TEST_F(ReplayTest, TensorsThatDoNotOverlapGetBuffersOfTheirOwn) {
  F32 x({1, 2, 3, 4, 5, 6, 7, 8}, {4});
  DLTensor out = x.dl;
  out.byte_offset = 4 * sizeof(float);  // right after x
  sample::prefix_step(&x.dl, &out);
  const std::string dir = mate::dump::find_call_dirs(dumps()).at(0);
  expect_recorded(dir, {{"x", va_of(x.dl)}, {"out", va_of(out)}});
  CountingAllocator counting;
  mate::replay::Options o;
  o.allocator = &counting;
  auto results = replay(o);
  EXPECT_EQ(results.at(0).outcome, Outcome::Passed) << mate::replay::format_line(results[0]);
  EXPECT_EQ(counting.sizes, (std::vector<std::size_t>{16, 16}));
}

// A MATE_LOGLEVEL=10 still in force while replaying must not dump the replayed calls (into the
// very dump being replayed, here): replay caps the level at 5, and puts it back afterwards.
TEST_F(ReplayTest, ReplayDoesNotDumpTheCallsItReplays) {
  run_workload();
  ASSERT_EQ(mate::dump::find_call_dirs(dumps()).size(), 3u);
  ASSERT_EQ(mate::log::level(), 10);
  auto results = mate::replay::replay_all(dumps());  // level 10, MATE_DUMP_DIR = the dump
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) EXPECT_EQ(r.outcome, Outcome::Passed) << mate::replay::format_line(r);
  EXPECT_EQ(mate::dump::find_call_dirs(dumps()).size(), 3u);
  EXPECT_EQ(mate::replay::replay_call(results[0].dir).outcome, Outcome::Passed);
  EXPECT_EQ(mate::dump::find_call_dirs(dumps()).size(), 3u);
  // The log still has the replayed calls (level 5), and the level is 10 again afterwards.
  EXPECT_EQ(mate::log::level(), 10);
  std::ifstream log(root_ / "log.txt");
  std::stringstream text;
  text << log.rdbuf();
  std::size_t axpy = 0;
  for (std::size_t at = text.str().find("sample.axpy inputs"); at != std::string::npos; at = text.str().find("sample.axpy inputs", at + 1)) ++axpy;
  EXPECT_EQ(axpy, 3u) << text.str();  // the original call and its two replays
}

// A tensor the dump could not save says why, once ("not saved: not saved: ..." before).
TEST_F(ReplayTest, ATensorThatWasNotSavedSaysWhyOnce) {
  F32 x({1, 2}, {2}), out({0, 0}, {2});
  sample::copy_or_throw(&x.dl, &out.dl, false);
  const std::string dir = mate::dump::find_call_dirs(dumps()).at(0);
  edit_call_json(dir, [](nlohmann::json& j) {
    j["status"] = "failed";
    j["error"] = "write inputs/00_x.pt: File too large";
    j["inputs"][0].erase("file");
    j["inputs"][0]["error"] = "not saved: write inputs/00_x.pt: File too large";
    j.erase("outputs");
  });
  auto results = replay();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Error);
  EXPECT_EQ(results[0].message, "tensor x was not saved: write inputs/00_x.pt: File too large");
}

// A "device" whose memory is host memory, so host kernels can run on it: replay must allocate
// and fill the rebuilt tensors through the device layer and read the results back through it.
class HostBackedDevice : public mate::testing::HostMemoryDevice {};

DLDeviceType g_seen_device = kDLCPU;
int g_seen_ordinal = -1;
void device_probe(const DLTensor* x, DLTensor* out) {
  MATE_API("t.device_probe", x, out).outputs(MATE_ARGS(out)).run([&] {
    g_seen_device = x->device.device_type;
    g_seen_ordinal = x->device.device_id;
    static_cast<float*>(out->data)[0] = static_cast<const float*>(x->data)[0] * 3;
  });
}
MATE_REPLAYABLE("t.device_probe", &device_probe);

// device_probe dumped with its tensors on `where` (memory of `device`), then replayed.
std::vector<mate::replay::CallResult> probe_and_replay(ReplayTest& test, HostBackedDevice& device, DLDevice where,
                                                       const mate::replay::Options& options = {}) {
  mate::tensor::set_device_backend(mate::device::Kind::Cuda, &device);
  F32 x({2}, {1}), out({0}, {1});
  x.dl.device = out.dl.device = where;
  device_probe(&x.dl, &out.dl);
  g_seen_device = kDLCPU;
  g_seen_ordinal = -1;
  auto results = test.replay(options);
  mate::tensor::set_device_backend(mate::device::Kind::Cuda, nullptr);
  return results;
}

TEST_F(ReplayTest, DeviceTensorsAreRebuiltOnTheirDevice) {
  HostBackedDevice device;
  auto results = probe_and_replay(*this, device, {kDLCUDA, 0});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Passed) << mate::replay::format_line(results[0]);
  EXPECT_EQ(g_seen_device, kDLCUDA);
  EXPECT_EQ(device.reserves, 2);
  EXPECT_EQ(device.writes, 2);
  EXPECT_EQ(device.releases, 2);
}

// A tensor recorded on cuda:1 is rebuilt on device 1 (the backend set for the kind serves every
// ordinal here; the driver's are per ordinal: GuardRun.DeviceAllocationsGoToTheProgramsCurrentDevice
// and ReplayCli.ADumpOfDeviceOneReplaysThereOrWhereDeviceSays), and with Options::device on the
// device named there, as replaying rank 3's dump on a one-GPU machine needs.
TEST_F(ReplayTest, ATensorRecordedOnDeviceOneIsRebuiltThereOrOnTheDeviceAsked) {
  HostBackedDevice device;
  auto results = probe_and_replay(*this, device, {kDLCUDA, 1});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Passed) << mate::replay::format_line(results[0]);
  EXPECT_EQ(g_seen_device, kDLCUDA);
  EXPECT_EQ(g_seen_ordinal, 1);
  EXPECT_EQ(device.releases, device.reserves);

  mate::replay::Options on_zero;
  on_zero.device = 0;
  mate::tensor::set_device_backend(mate::device::Kind::Cuda, &device);
  results = mate::replay::replay_all(dumps(), on_zero);
  mate::tensor::set_device_backend(mate::device::Kind::Cuda, nullptr);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Passed) << mate::replay::format_line(results[0]);
  EXPECT_EQ(g_seen_ordinal, 0);
  EXPECT_EQ(device.releases, device.reserves);
}

// An in-place call on a device tensor: one device buffer, written once per tensor.
TEST_F(ReplayTest, InPlaceDeviceTensorsShareOneDeviceBuffer) {
  HostBackedDevice device;
  mate::tensor::set_device_backend(mate::device::Kind::Cuda, &device);
  F32 x({1, 2, 3, 4}, {4});
  x.dl.device = {kDLCUDA, 0};
  sample::prefix_step(&x.dl, &x.dl);
  const std::string dir = mate::dump::find_call_dirs(dumps()).at(0);
  expect_recorded(dir, {{"x", va_of(x.dl)}, {"out", va_of(x.dl)}});
  const int reserves = device.reserves;
  auto results = replay();
  mate::tensor::set_device_backend(mate::device::Kind::Cuda, nullptr);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Passed) << mate::replay::format_line(results[0]);
  EXPECT_EQ(device.reserves - reserves, 1);
  EXPECT_EQ(device.releases, device.reserves);
}

}  // namespace
