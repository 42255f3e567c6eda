// Level-10 dumps the way a kernel library gets them: instrumented calls with MATE_LOGLEVEL=10.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "stopped_child.hpp"
#include "host_memory_device.hpp"
#include "mate/config.hpp"
#include "mate/dump/call_record.hpp"
#include "mate/dump/dump.hpp"
#include "mate/log/api.hpp"
#include "mate/tensor/stats.hpp"
#include "dl_tensor.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using mate::config::ScopedOverride;
using mate::config::Var;
using mate::dump::CallStatus;
using json = nlohmann::json;

using F32 = mate::testing::F32Tensor;
using mate::testing::read_file;

std::function<void()> g_inside;  // runs inside add_one's body

void add_one(const DLTensor* x, DLTensor* out) {
  MATE_API("t.add_one", x, out).outputs(MATE_ARGS(out)).run([&] {
    if (g_inside) g_inside();
    const auto n = mate::tensor::TensorView(*x).numel();
    for (std::int64_t i = 0; i < n; ++i) static_cast<float*>(out->data)[i] = static_cast<const float*>(x->data)[i] + 1;
  });
}

void skip_me(const DLTensor* x) {
  MATE_API("t.skip_me", x).run([] {});
}

enum class Layout { RowMajor = 0, ColMajor = 1 };
std::string_view to_string(Layout l) { return l == Layout::RowMajor ? "RowMajor" : "ColMajor"; }

void many(const std::vector<const DLTensor*>& xs, double eps, Layout layout, const char* tag, std::uint64_t big) {
  MATE_API("t.many", xs, eps, layout, tag, big).run([] {});
}

void raises(const DLTensor* x, int code) {
  MATE_API("t.raises", x, code).run([&] { throw std::out_of_range("code " + std::to_string(code) + " out of range"); });
}

void tagged(const DLTensor* x, const std::string& tag) {
  MATE_API("t.tagged", x, tag).run([] {});
}

std::string big_return(const DLTensor* x, std::size_t n) {
  return MATE_API("t.big_return", x, n).run([&] { return std::string(n, 'r'); });
}

void raises_long(const DLTensor* x, std::size_t n) {
  MATE_API("t.raises_long", x, n).run([&] { throw std::runtime_error(std::string(n, 'e')); });
}

class DumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    configure({});
  }
  void TearDown() override {
    g_inside = nullptr;
    overrides_.clear();
    mate::log::reconfigure();
    mate::dump::reconfigure();
  }
  void configure(const std::vector<std::pair<Var, std::string>>& extra, int level = 10) {
    overrides_.clear();
    overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_LOGLEVEL, std::to_string(level)));
    overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_LOGDEST, (root_ / "log.txt").string()));
    overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_DUMP_DIR, (root_ / "dumps").string()));
    for (const auto& [v, value] : extra) overrides_.push_back(std::make_unique<ScopedOverride>(v, value));
    mate::log::reconfigure();
    mate::dump::reconfigure();
  }
  std::vector<std::string> dirs() {
    if (!fs::exists(root_ / "dumps")) return {};
    return mate::dump::find_call_dirs((root_ / "dumps").string());
  }
  static unsigned mode_of(const fs::path& p) {
    struct stat st{};
    ::stat(p.c_str(), &st);
    return st.st_mode & 0777;
  }

  mate::testing::TempDir tmp_{"mate_dump_test"};
  fs::path root_{tmp_.path};
  std::vector<std::unique_ptr<ScopedOverride>> overrides_;
};

TEST_F(DumpTest, EachCallGetsADirectoryWithMetadataInputsAndOutputs) {
  F32 x({1, 2, 3, 4, 5, 6}, {2, 3}), out({0, 0, 0, 0, 0, 0}, {2, 3});
  ::testing::internal::CaptureStderr();
  add_one(&x.dl, &out.dl);
  add_one(&x.dl, &out.dl);
  const std::string err = ::testing::internal::GetCapturedStderr();
  // One banner naming where the dumps go.
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find(fs::absolute(root_ / "dumps").string()), std::string::npos) << err;
  EXPECT_NE(err.find("sensitive"), std::string::npos) << err;

  auto d = dirs();
  ASSERT_EQ(d.size(), 2u);
  const std::regex name(R"(\d{8}_\d{6}_\d{3}_pid\d+_call\d{8}_t\.add_one)");
  EXPECT_TRUE(std::regex_match(fs::path(d[0]).filename().string(), name)) << d[0];
  EXPECT_EQ(mode_of(root_ / "dumps"), 0700u);
  EXPECT_EQ(mode_of(d[0]), 0700u);

  mate::dump::CallRecord c = mate::dump::read_call(d[0]);
  EXPECT_EQ(c.function, "t.add_one");
  EXPECT_EQ(c.status, CallStatus::Completed);
  EXPECT_EQ(c.pid, ::getpid());
  EXPECT_EQ(c.tensor_format, "torch_save");
  EXPECT_EQ(c.inputs[0].file, "inputs/00_x.pt");
  EXPECT_FALSE(c.started.empty());
  EXPECT_FALSE(c.finished.empty());
  EXPECT_EQ(c.mate_version, "0.1.0");
  ASSERT_EQ(c.inputs.size(), 2u);
  ASSERT_EQ(c.outputs.size(), 1u);
  EXPECT_EQ(c.inputs[0].name, "x");
  EXPECT_EQ(c.outputs[0].name, "out");
  EXPECT_EQ(mode_of(fs::path(d[0]) / "call.json"), 0600u);
  EXPECT_EQ(mode_of(fs::path(d[0]) / c.inputs[0].file), 0600u);
  EXPECT_LT(mate::dump::read_call(d[0]).seq, mate::dump::read_call(d[1]).seq);

  // Input snapshot of `out` is its content before the call; the output its content after.
  mate::dump::TensorRecord in_out = mate::dump::load_tensor(c, c.inputs[1]);
  mate::dump::TensorRecord after = mate::dump::load_tensor(c, c.outputs[0]);
  std::vector<float> before(6), result(6);
  std::memcpy(before.data(), in_out.data.data(), 24);
  std::memcpy(result.data(), after.data.data(), 24);
  EXPECT_EQ(before, std::vector<float>(6, 0.0f));
  EXPECT_EQ(result, (std::vector<float>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(after.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(mate::dump::totals().calls, 2u);
}

TEST_F(DumpTest, InputsAreOnDiskBeforeTheBodyRuns) {
  F32 x({1, 2}, {2}), out({0, 0}, {2});
  bool checked = false;
  g_inside = [&] {
    auto d = dirs();
    ASSERT_EQ(d.size(), 1u);
    mate::dump::CallRecord c = mate::dump::read_call(d[0]);
    EXPECT_EQ(c.status, CallStatus::InputsSaved);
    mate::dump::TensorRecord t = mate::dump::load_tensor(c, c.inputs[0]);
    EXPECT_EQ(t.data.size(), 8u);
    checked = true;
  };
  add_one(&x.dl, &out.dl);
  EXPECT_TRUE(checked);
}

// A string argument that is not UTF-8 (JSON's encoding) must not make the dump throw into the
// user's API call: it is recorded with U+FFFD in place of the invalid bytes.
TEST_F(DumpTest, AStringArgumentThatIsNotUtf8IsRecordedNotThrown) {
  F32 x({1}, {1});
  EXPECT_NO_THROW(tagged(&x.dl, std::string("ab\xff\xfe") + "c"));
  auto d = dirs();
  ASSERT_EQ(d.size(), 1u);
  mate::dump::CallRecord c = mate::dump::read_call(d[0]);
  EXPECT_EQ(c.status, CallStatus::Completed);
  ASSERT_EQ(c.inputs.size(), 2u);
  EXPECT_EQ(c.inputs[1].text, "ab\xef\xbf\xbd\xef\xbf\xbd" "c");
}

TEST_F(DumpTest, ARaisingCallIsRecordedWithItsException) {
  F32 x({1}, {1});
  EXPECT_THROW(raises(&x.dl, 7), std::out_of_range);
  auto d = dirs();
  ASSERT_EQ(d.size(), 1u);
  mate::dump::CallRecord c = mate::dump::read_call(d[0]);
  EXPECT_EQ(c.status, CallStatus::Raised);
  EXPECT_EQ(c.exception_type, "std::out_of_range");
  EXPECT_EQ(c.exception_message, "code 7 out of range");
  ASSERT_EQ(c.inputs.size(), 2u);
  EXPECT_EQ(c.inputs[1].kind, mate::log::Arg::Kind::Int);
  EXPECT_EQ(c.inputs[1].int_value, 7);
}

TEST_F(DumpTest, DirectoriesAreFoundInCallOrderAndNeverCollideAcrossThreads) {
  F32 x({1}, {1});
  for (int i = 0; i < 30; ++i) skip_me(&x.dl);
  auto d = dirs();
  ASSERT_EQ(d.size(), 30u);
  for (std::size_t i = 1; i < d.size(); ++i) EXPECT_LT(mate::dump::read_call(d[i - 1]).seq, mate::dump::read_call(d[i]).seq);
  // Every call.json names the process: its pid and its first dumped call's start.
  const mate::dump::CallRecord first = mate::dump::read_call(d[0]);
  EXPECT_FALSE(first.process_first_started.empty());
  EXPECT_LE(first.process_first_started, first.started);
  EXPECT_EQ(mate::dump::read_call(d[29]).process_first_started, first.process_first_started);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      F32 y({2}, {1});
      for (int i = 0; i < 25; ++i) skip_me(&y.dl);
    });
  for (auto& t : threads) t.join();
  d = dirs();
  EXPECT_EQ(d.size(), 130u);
  for (const auto& dir : d) EXPECT_EQ(mate::dump::read_call(dir).status, CallStatus::Completed);
  // In sequence order, even where threads created their directories out of that order.
  for (std::size_t i = 1; i < d.size(); ++i) EXPECT_LT(mate::dump::read_call(d[i - 1]).seq, mate::dump::read_call(d[i]).seq);
}

// A forked child is another process: its calls record its own first call, not its parent's.
TEST_F(DumpTest, AForkedChildRecordsItsOwnFirstCall) {
  F32 x({1}, {1});
  skip_me(&x.dl);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    skip_me(&x.dl);
    skip_me(&x.dl);
    std::_Exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::vector<mate::dump::CallRecord> parent, child;
  for (const std::string& d : dirs()) {
    mate::dump::CallRecord c = mate::dump::read_call(d);
    (c.pid == static_cast<long>(pid) ? child : parent).push_back(c);
  }
  ASSERT_EQ(parent.size(), 1u);
  ASSERT_EQ(child.size(), 2u);
  EXPECT_LE(parent[0].process_first_started, parent[0].started);  // this process's first dump (maybe an earlier test's)
  EXPECT_NE(child[0].process_first_started, parent[0].process_first_started);
  EXPECT_EQ(child[0].process_first_started, child[1].process_first_started);
  EXPECT_EQ(child[0].process_first_started, std::min(child[0].started, child[1].started));
}

// A call directory as the writer names it, with a minimal call.json.
void make_call(const fs::path& root, const std::string& stamp, long pid, std::uint64_t seq, const std::string& process,
               const std::string& started) {
  char name[128];
  std::snprintf(name, sizeof name, "%s_pid%ld_call%08llu_t.f%llu", stamp.c_str(), pid, static_cast<unsigned long long>(seq),
                static_cast<unsigned long long>(seq));
  fs::create_directories(root / name);
  json j = {{"format", "mate-dump"}, {"version", 1}, {"function", "t.f"}, {"seq", seq}, {"pid", pid},
            {"started", started}, {"status", "completed"}, {"tensor_format", "mate"}, {"inputs", json::array()}};
  if (!process.empty()) j["process_first_started"] = process;
  std::ofstream(root / name / "call.json") << j.dump();
}

// The directory names find_call_dirs returns, in its order.
std::vector<std::string> call_names(const fs::path& root) {
  std::vector<std::string> names;
  for (const std::string& d : mate::dump::find_call_dirs(root.string())) names.push_back(fs::path(d).filename().string());
  return names;
}

// Names sort by timestamp, which threads and processes interleave; calls are found in the
// order they were made: processes by their first call, each process's calls by seq.
TEST_F(DumpTest, CallDirectoriesAreFoundInCallOrderNotNameOrder) {
  const fs::path r = root_ / "crafted";
  // Process A (pid 500): call 2's thread created its directory 2 ms before call 1's.
  const std::string a = "2026-11-22T10:00:00.000100Z";
  make_call(r, "20261122_100000_003", 500, 1, a, "2026-11-22T10:00:00.003000Z");
  make_call(r, "20261122_100000_001", 500, 2, a, "2026-11-22T10:00:00.001000Z");
  make_call(r, "20261122_100000_009", 500, 3, a, "2026-11-22T10:00:00.009000Z");
  // Process B (pid 42) started after A's first call, while A was still running.
  const std::string b = "2026-11-22T10:00:00.002000Z";
  make_call(r, "20261122_100000_002", 42, 7, b, b);
  make_call(r, "20261122_100000_004", 42, 8, b, "2026-11-22T10:00:00.004000Z");
  // Process C reuses A's pid later; its call.json is unreadable, the name still places it
  // (pid 500 has two processes here, so it is not attached to either).
  make_call(r, "20261122_110000_000", 500, 1, "2026-11-22T11:00:00.000000Z", "2026-11-22T11:00:00.000000Z");
  make_call(r, "20261122_110000_001", 500, 2, "2026-11-22T11:00:00.000000Z", "2026-11-22T11:00:00.001000Z");
  fs::create_directories(r / "20261122_110000_002_pid500_call00000003_t.f3");  // no call.json
  // A directory whose name does not parse comes last.
  fs::create_directories(r / "renamed_pid_call");
  std::vector<std::string> names = call_names(r);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "20261122_100000_003_pid500_call00000001_t.f1", "20261122_100000_001_pid500_call00000002_t.f2",
                       "20261122_100000_009_pid500_call00000003_t.f3", "20261122_100000_002_pid42_call00000007_t.f7",
                       "20261122_100000_004_pid42_call00000008_t.f8", "20261122_110000_000_pid500_call00000001_t.f1",
                       "20261122_110000_001_pid500_call00000002_t.f2", "20261122_110000_002_pid500_call00000003_t.f3",
                       "renamed_pid_call"}));
  // Dumps that do not record their process (older writers): one process per pid.
  const fs::path old = root_ / "old";
  make_call(old, "20261122_100000_005", 9, 1, "", "2026-11-22T10:00:00.005000Z");
  make_call(old, "20261122_100000_004", 9, 2, "", "2026-11-22T10:00:00.004000Z");
  make_call(old, "20261122_100000_001", 10, 1, "", "2026-11-22T10:00:00.001000Z");
  names = call_names(old);
  EXPECT_EQ(names, (std::vector<std::string>{"20261122_100000_001_pid10_call00000001_t.f1",
                                             "20261122_100000_005_pid9_call00000001_t.f1",
                                             "20261122_100000_004_pid9_call00000002_t.f2"}));
  // ... until a sequence number repeats: a later process reused the pid, and is not interleaved.
  const fs::path reused = root_ / "reused";
  make_call(reused, "20261122_100000_000", 77, 1, "", "2026-11-22T10:00:00.000000Z");
  make_call(reused, "20261122_100000_002", 77, 2, "", "2026-11-22T10:00:00.002000Z");
  make_call(reused, "20261122_100000_001", 77, 3, "", "2026-11-22T10:00:00.001000Z");
  make_call(reused, "20261122_110000_000", 77, 1, "", "2026-11-22T11:00:00.000000Z");
  make_call(reused, "20261122_110000_001", 77, 2, "", "2026-11-22T11:00:00.001000Z");
  names = call_names(reused);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "20261122_100000_000_pid77_call00000001_t.f1", "20261122_100000_002_pid77_call00000002_t.f2",
                       "20261122_100000_001_pid77_call00000003_t.f3", "20261122_110000_000_pid77_call00000001_t.f1",
                       "20261122_110000_001_pid77_call00000002_t.f2"}));
  // A call.json without "pid" keeps the pid of its directory's name.
  const fs::path nopid = root_ / "nopid";
  make_call(nopid, "20261122_100000_000", 5, 1, "", "2026-11-22T10:00:00.000000Z");
  make_call(nopid, "20261122_100000_001", 5, 2, "", "2026-11-22T10:00:00.001000Z");
  make_call(nopid, "20261122_100000_002", 5, 3, "", "2026-11-22T10:00:00.002000Z");
  {
    const fs::path second = nopid / "20261122_100000_001_pid5_call00000002_t.f2" / "call.json";
    json j = json::parse(read_file(second));
    j.erase("pid");
    std::ofstream(second) << j.dump();
  }
  names = call_names(nopid);
  EXPECT_EQ(names, (std::vector<std::string>{"20261122_100000_000_pid5_call00000001_t.f1",
                                             "20261122_100000_001_pid5_call00000002_t.f2",
                                             "20261122_100000_002_pid5_call00000003_t.f3"}));
}

TEST_F(DumpTest, LevelFiveDoesNotDump) {
  configure({}, 5);
  F32 x({1}, {1});
  skip_me(&x.dl);
  EXPECT_TRUE(dirs().empty());
}

TEST_F(DumpTest, IncludeThenExcludePatterns) {
  configure({{Var::MATE_DUMP_INCLUDE, "t.*"}, {Var::MATE_DUMP_EXCLUDE, "*skip*"}});
  F32 x({1}, {1}), out({0}, {1});
  skip_me(&x.dl);
  add_one(&x.dl, &out.dl);
  auto d = dirs();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(mate::dump::read_call(d[0]).function, "t.add_one");
  configure({{Var::MATE_DUMP_INCLUDE, "other.*"}});
  add_one(&x.dl, &out.dl);
  EXPECT_EQ(dirs().size(), 1u);
}

TEST_F(DumpTest, CountCapStopsDumpingWithOneWarning) {
  configure({{Var::MATE_DUMP_MAX_COUNT, "2"}});
  F32 x({1}, {1});
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) skip_me(&x.dl);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(dirs().size(), 2u);
  EXPECT_EQ(mate::dump::totals().skipped_count, 3u);
  EXPECT_NE(err.find("MATE_DUMP_MAX_COUNT=2"), std::string::npos) << err;
  EXPECT_EQ(err.find("cap reached"), err.rfind("cap reached")) << "one warning only: " << err;
}

TEST_F(DumpTest, SizeCapIsNeverCrossedAndWarnsOnce) {
  // 500 kB cap; each call writes two 40 kB inputs and a 40 kB output, and reserves 2 x 80 kB + 64 KiB:
  // three calls fit, the fourth would cross the cap.
  configure({{Var::MATE_DUMP_MAX_SIZE_GB, "0.0005"}});
  F32 x(std::vector<float>(10000, 1.0f), {10000}), out(std::vector<float>(10000, 0.0f), {10000});
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 6; ++i) add_one(&x.dl, &out.dl);
  const std::string err = ::testing::internal::GetCapturedStderr();
  auto d = dirs();
  ASSERT_GE(d.size(), 1u);
  ASSERT_LT(d.size(), 6u);
  std::uint64_t on_disk = 0;
  for (const auto& dir : d) {
    EXPECT_EQ(mate::dump::read_call(dir).status, CallStatus::Completed);
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) on_disk += e.file_size();
  }
  EXPECT_LE(on_disk, 500000u);
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(mate::dump::totals().bytes, on_disk);
  EXPECT_NE(err.find("MATE_DUMP_MAX_SIZE_GB=0.0005"), std::string::npos) << err;
  EXPECT_EQ(err.find("size cap reached"), err.rfind("size cap reached")) << err;
}

// call.json counts against the cap with its real size: a long string argument, a long returned
// string or a long exception message never takes the dumps past it.
TEST_F(DumpTest, SizeCapCountsCallJsonAtItsRealSize) {
  // 100 kB cap; each call's input file is about 4 kB, so every call's tensors fit easily.
  configure({{Var::MATE_DUMP_MAX_SIZE_GB, "0.0001"}});
  F32 x(std::vector<float>(1000, 1.0f), {1000});
  ::testing::internal::CaptureStderr();
  tagged(&x.dl, std::string(200000, 't'));  // its call.json alone is over the cap: not dumped
  tagged(&x.dl, "short");                   // dumped whole
  EXPECT_EQ(big_return(&x.dl, 150000).size(), 150000u);  // dumped, the return value not saved
  EXPECT_THROW(raises_long(&x.dl, 150000), std::runtime_error);  // dumped, the message cut
  const std::string err = ::testing::internal::GetCapturedStderr();

  std::uint64_t on_disk = 0;
  for (const auto& e : fs::recursive_directory_iterator(root_ / "dumps"))
    if (e.is_regular_file()) on_disk += e.file_size();
  EXPECT_LE(on_disk, 100000u);
  const auto d = dirs();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(mate::dump::totals().bytes, on_disk);
  EXPECT_EQ(mate::dump::totals().skipped_size, 1u);
  EXPECT_EQ(mate::dump::totals().failed, 0u);
  EXPECT_NE(err.find("size cap reached: MATE_DUMP_MAX_SIZE_GB=0.0001"), std::string::npos) << err;

  const mate::dump::CallRecord small = mate::dump::read_call(d[0]);
  EXPECT_EQ(small.function, "t.tagged");
  EXPECT_EQ(small.status, CallStatus::Completed);
  EXPECT_EQ(small.inputs.at(1).text, "short");

  const mate::dump::CallRecord ret = mate::dump::read_call(d[1]);
  EXPECT_EQ(ret.status, CallStatus::Completed);
  ASSERT_EQ(ret.outputs.size(), 1u);
  EXPECT_EQ(ret.outputs[0].name, "return");
  EXPECT_EQ(ret.outputs[0].kind, mate::log::Arg::Kind::None);
  EXPECT_EQ(ret.outputs[0].type, "str");
  EXPECT_NE(ret.outputs[0].error.find("not saved: MATE_DUMP_MAX_SIZE_GB"), std::string::npos) << ret.outputs[0].error;

  const mate::dump::CallRecord raised = mate::dump::read_call(d[2]);
  EXPECT_EQ(raised.status, CallStatus::Raised);
  EXPECT_EQ(raised.exception_type, "std::runtime_error");
  EXPECT_LT(raised.exception_message.size(), 5000u);
  EXPECT_EQ(raised.exception_message.substr(0, 100), std::string(100, 'e'));
  EXPECT_NE(raised.exception_message.find("more bytes not saved: MATE_DUMP_MAX_SIZE_GB"), std::string::npos);
}

TEST_F(DumpTest, SafetensorsModeWritesOneFilePerPhase) {
  configure({{Var::MATE_DUMP_SAFETENSORS, "1"}});
  F32 x({1, 2, 3, 4, 5, 6}, {3, 2}, {1, 3}), out({0, 0, 0, 0, 0, 0}, {3, 2});
  add_one(&x.dl, &out.dl);
  auto d = dirs();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(fs::exists(fs::path(d[0]) / "inputs.safetensors"));
  EXPECT_TRUE(fs::exists(fs::path(d[0]) / "outputs.safetensors"));
  mate::dump::CallRecord c = mate::dump::read_call(d[0]);
  EXPECT_EQ(c.tensor_format, "safetensors");
  mate::dump::TensorRecord t = mate::dump::load_tensor(c, c.inputs[0]);
  std::vector<float> v(6);
  std::memcpy(v.data(), t.data.data(), 24);
  EXPECT_EQ(v, (std::vector<float>{1, 4, 2, 5, 3, 6}));  // the transposed view, made contiguous
  EXPECT_EQ(t.strides, (std::vector<std::int64_t>{2, 1}));
}

// A device backend over host memory that records the size of each read.
class RecordingBackend : public mate::testing::HostMemoryDevice {
 public:
  const char* name() const noexcept override { return "recording"; }
};

TEST_F(DumpTest, DeviceTensorsAreCopiedInBoundedChunks) {
  RecordingBackend backend;
  mate::tensor::set_device_backend(mate::device::Kind::Cuda, &backend);
  std::vector<float> big((std::size_t{10} << 20) / 4);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1000);
  F32 x(std::move(big), {static_cast<std::int64_t>((std::size_t{10} << 20) / 4)});
  x.dl.device = {kDLCUDA, 0};
  skip_me(&x.dl);
  mate::tensor::set_device_backend(mate::device::Kind::Cuda, nullptr);
  // Level 10 includes level 5's statistics, which read the tensor too, also in chunks.
  EXPECT_GE(backend.total_read, std::size_t{10} << 20);
  EXPECT_LE(backend.max_read, mate::tensor::kDefaultChunkBytes);
  EXPECT_GE(backend.reads, 3u);
  auto d = dirs();
  ASSERT_EQ(d.size(), 1u);
  mate::dump::CallRecord c = mate::dump::read_call(d[0]);
  mate::dump::TensorRecord t = mate::dump::load_tensor(c, c.inputs[0]);
  EXPECT_EQ(t.device.device_type, kDLCUDA);
  EXPECT_EQ(0, std::memcmp(t.data.data(), x.data.data(), t.data.size()));

  // The same with an explicit small chunk.
  RecordingBackend small;
  const std::string path = (root_ / "small.mtensor").string();
  ASSERT_TRUE(mate::dump::write_mtensor(path, mate::tensor::TensorView(x.dl), {&small, 4096}).ok());
  EXPECT_EQ(small.max_read, 4096u);
  EXPECT_EQ(small.reads, (std::size_t{10} << 20) / 4096);
}

// A "device" over host memory that stops the process in the middle of a dump: when a file whose
// name contains `phase` has a chunk of data in a call directory under `root` (the writer is
// copying a tensor into it), read() tells the test over a pipe and waits for its SIGKILL.
class StoppingBackend : public RecordingBackend {
 public:
  StoppingBackend(fs::path root, std::string phase, int ready_fd) : root_(std::move(root)), phase_(std::move(phase)), ready_fd_(ready_fd) {}
  mate::device::Status read(void* dst, std::uintptr_t src, std::size_t bytes) noexcept override {
    if (writing()) {
      const char one = 1;
      if (::write(ready_fd_, &one, 1) != 1) std::_Exit(5);
      for (;;) ::pause();
    }
    return RecordingBackend::read(dst, src, bytes);
  }

 private:
  bool writing() const noexcept {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root_, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string path = it->path().lexically_relative(root_).string();
      if (path.find(phase_) != std::string::npos && it->is_regular_file(ec) && it->file_size(ec) >= mate::tensor::kDefaultChunkBytes)
        return true;
    }
    return false;
  }
  fs::path root_;
  std::string phase_;
  int ready_fd_;
};

// What a SIGKILL in the middle of writing a tensor leaves: nothing under a tensor file's name
// that is not complete, and a call.json that names only complete files, so that `mate replay`
// reports the call as interrupted rather than reading half a tensor.
TEST_F(DumpTest, AProcessKilledWhileWritingATensorLeavesOnlyCompleteNamedFiles) {
  struct Case {
    std::string phase;  // the tensor being written when the process is killed
    bool safetensors;
  };
  for (const Case& k : {Case{"inputs", false}, Case{"outputs", false}, Case{"inputs", true}, Case{"outputs", true}}) {
    SCOPED_TRACE(k.phase + (k.safetensors ? " safetensors" : " torch_save"));
    configure({{Var::MATE_DUMP_SAFETENSORS, k.safetensors ? "1" : "0"}});
    fs::remove_all(root_ / "dumps");
    const auto child = mate::testing::fork_until_stopped([&](int ready_fd) {
      FILE* e = std::freopen((root_ / "child_stderr.txt").c_str(), "w", stderr);
      (void)e;
      StoppingBackend backend(root_ / "dumps", k.phase, ready_fd);
      mate::tensor::set_device_backend(mate::device::Kind::Cuda, &backend);
      const std::size_t n = 3 * mate::tensor::kDefaultChunkBytes / 4;  // 12 MiB: three chunks
      F32 x(std::vector<float>(n, 1.0f), {static_cast<std::int64_t>(n)}), out(std::vector<float>(n, 0.0f), {static_cast<std::int64_t>(n)});
      x.dl.device = out.dl.device = {kDLCUDA, 0};
      add_one(&x.dl, &out.dl);
    });
    ASSERT_GT(child.pid, 0);
    const bool stopped = child.stopped;
    const int status = mate::testing::kill_child(child.pid);
    ASSERT_TRUE(stopped) << "the child was not stopped mid-write (status " << status << ")";
    auto d = dirs();
    ASSERT_EQ(d.size(), 1u);
    const fs::path call = d[0];
    // On disk: complete files under their names, the interrupted one only as `.<name>.tmp.<pid>`.
    const std::string temporary_suffix = ".tmp." + std::to_string(child.pid);
    int temporaries = 0;
    for (const auto& e : fs::recursive_directory_iterator(call)) {
      if (!e.is_regular_file()) continue;
      const std::string name = e.path().filename().string(), rel = e.path().lexically_relative(call).string();
      if (name.starts_with(".") && name.ends_with(temporary_suffix)) {
        ++temporaries;
        EXPECT_NE(rel.find(k.phase), std::string::npos) << rel;
        continue;
      }
      if (name == "call.json") continue;
      if (name.ends_with(".pt")) {
        EXPECT_NO_THROW(mate::dump::read_torch_save(e.path().string())) << rel;
      }
      EXPECT_EQ(rel.find(k.phase), std::string::npos) << "a file of the phase being written has its name: " << rel;
    }
    EXPECT_EQ(temporaries, 1);
    // call.json names only complete files.
    const mate::dump::CallRecord c = mate::dump::read_call(call.string());
    EXPECT_EQ(c.status, k.phase == "inputs" ? CallStatus::WritingInputs : CallStatus::InputsSaved);
    ASSERT_EQ(c.inputs.size(), 2u);
    for (const auto& in : c.inputs) {
      if (k.phase == "inputs") {
        EXPECT_TRUE(in.file.empty()) << in.file;
        EXPECT_NE(in.error.find("not saved"), std::string::npos) << in.error;
      } else {
        EXPECT_EQ(mate::dump::load_tensor(c, in).data.size(), 3 * mate::tensor::kDefaultChunkBytes) << in.name;
      }
    }
    EXPECT_TRUE(c.outputs.empty());
  }
}

TEST_F(DumpTest, UnreadableMemoryIsRecordedOnTheArgument) {
  F32 x({1}, {1});
  x.dl.device = {kDLVulkan, 0};
  skip_me(&x.dl);
  auto d = dirs();
  ASSERT_EQ(d.size(), 1u);
  mate::dump::CallRecord c = mate::dump::read_call(d[0]);
  EXPECT_EQ(c.status, CallStatus::Completed);
  EXPECT_NE(c.inputs[0].error.find("cannot be read"), std::string::npos) << c.inputs[0].error;
  EXPECT_THROW(mate::dump::load_tensor(c, c.inputs[0]), mate::dump::DumpError);
}

// A file-size limit makes the second call's dump fail mid-write: that call's directory is
// marked failed, the first dump is intact, the program keeps running and dumping. SIGXFSZ keeps
// its default action (kill): the writer checks the limit rather than let a write raise it.
TEST_F(DumpTest, AnIoErrorMarksTheCallFailedAndDamagesNothing) {
  const fs::path err_file = root_ / "child_stderr.txt";
  fs::create_directories(root_);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FILE* e = std::freopen(err_file.c_str(), "w", stderr);
    (void)e;
    rlimit lim{1 << 20, 1 << 20};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    F32 small({1, 2}, {2}), out({0, 0}, {2});
    F32 big(std::vector<float>(1 << 19, 3.0f), {1 << 19});  // 2 MiB: over the limit
    add_one(&small.dl, &out.dl);
    skip_me(&big.dl);
    add_one(&small.dl, &out.dl);
    skip_me(&big.dl);
    std::fflush(stderr);
    std::_Exit(out.data[0] == 2.0f ? 0 : 3);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto d = dirs();
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(mate::dump::read_call(d[0]).status, CallStatus::Completed);
  mate::dump::CallRecord failed = mate::dump::read_call(d[1]);
  EXPECT_EQ(failed.status, CallStatus::Failed);
  EXPECT_NE(failed.error.find("File too large"), std::string::npos) << failed.error;
  // The tensor that did not fit is named nowhere, and neither it nor its temporary is on disk.
  EXPECT_TRUE(failed.inputs[0].file.empty()) << failed.inputs[0].file;
  EXPECT_NE(failed.inputs[0].error.find("not saved: write "), std::string::npos) << failed.inputs[0].error;
  EXPECT_NE(failed.inputs[0].error.find("File too large"), std::string::npos) << failed.inputs[0].error;
  EXPECT_TRUE(fs::is_empty(fs::path(d[1]) / "inputs")) << "the partial file is removed";
  EXPECT_EQ(mate::dump::read_call(d[2]).status, CallStatus::Completed);
  mate::dump::CallRecord first = mate::dump::read_call(d[0]);
  EXPECT_EQ(mate::dump::load_tensor(first, first.outputs[0]).data.size(), 8u);
  const std::string err = read_file(err_file);
  EXPECT_NE(err.find("dump failed"), std::string::npos) << err;
  EXPECT_EQ(err.find("dump failed"), err.rfind("dump failed")) << "one warning: " << err;
}

TEST_F(DumpTest, AnUnusableDumpDirectoryDisablesDumpsWithOneMessage) {
  fs::create_directories(root_);
  std::ofstream(root_ / "file") << "x";
  configure({{Var::MATE_DUMP_DIR, (root_ / "file" / "dumps").string()}});
  F32 x({1}, {1});
  ::testing::internal::CaptureStderr();
  skip_me(&x.dl);
  skip_me(&x.dl);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot create MATE_DUMP_DIR="), std::string::npos) << err;
  EXPECT_EQ(err.find("cannot create"), err.rfind("cannot create")) << err;
}

// A MATE_DUMP_DIR that is a regular file: the one message says why dumps are off, and no banner
// announces dumps that never happen.
TEST_F(DumpTest, ADumpDirectoryThatIsAFileIsReportedWithoutTheBanner) {
  fs::create_directories(root_);
  std::ofstream(root_ / "file") << "x";
  configure({{Var::MATE_DUMP_DIR, (root_ / "file").string()}});
  F32 x({1}, {1});
  ::testing::internal::CaptureStderr();
  skip_me(&x.dl);
  skip_me(&x.dl);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "mate: level-10 dumps disabled: MATE_DUMP_DIR=" + (root_ / "file").string() + " is not a directory\n");
}

TEST_F(DumpTest, ListsAndScalarsAreRecordedByValueAndTensorListsByFile) {
  F32 a({1, 2}, {2}), b({3}, {1});
  many({&a.dl, &b.dl}, std::nan(""), Layout::ColMajor, "tag \"quoted\"", ~std::uint64_t{0});
  auto d = dirs();
  ASSERT_EQ(d.size(), 1u);
  mate::dump::CallRecord c = mate::dump::read_call(d[0]);
  ASSERT_EQ(c.inputs.size(), 5u);
  ASSERT_EQ(c.inputs[0].kind, mate::log::Arg::Kind::List);
  ASSERT_EQ(c.inputs[0].items.size(), 2u);
  EXPECT_EQ(c.inputs[0].items[1].file, "inputs/00_xs.1.pt");
  EXPECT_EQ(mate::dump::load_tensor(c, c.inputs[0].items[1]).data.size(), 4u);
  EXPECT_TRUE(std::isnan(c.inputs[1].float_value));
  EXPECT_EQ(c.inputs[2].kind, mate::log::Arg::Kind::Enum);
  EXPECT_EQ(c.inputs[2].int_value, 1);
  EXPECT_EQ(c.inputs[2].text, "ColMajor");
  EXPECT_EQ(c.inputs[3].text, "tag \"quoted\"");
  EXPECT_EQ(c.inputs[4].uint_value, ~std::uint64_t{0});
}

TEST_F(DumpTest, ARemovedDumpRootIsCreatedAgain) {
  F32 x({1}, {1});
  skip_me(&x.dl);
  fs::remove_all(root_ / "dumps");
  skip_me(&x.dl);
  auto d = dirs();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(mate::dump::read_call(d[0]).status, CallStatus::Completed);
  EXPECT_EQ(mode_of(root_ / "dumps"), 0700u);
  EXPECT_EQ(mate::dump::totals().failed, 0u);
}


// Links inside a dump lead out of it and are not followed: a tensor file, call.json, inputs/ or
// a call directory that is a link is an error naming the path. The directory named (--dir) may
// itself be a link.
TEST_F(DumpTest, LinksInsideADumpAreRejectedNamingThePath) {
  F32 x({1, 2}, {2}), out({0, 0}, {2});
  add_one(&x.dl, &out.dl);
  auto d = dirs();
  ASSERT_EQ(d.size(), 1u);
  const fs::path call = d[0], outside = root_ / "outside";
  fs::create_directories(outside);
  auto expect_error = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const mate::dump::DumpError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no DumpError";
    return "";
  };
  mate::dump::CallRecord c = mate::dump::read_call(call.string());
  const fs::path file = call / c.inputs[0].file;
  // A tensor file that is a link.
  fs::copy_file(file, outside / "x.pt");
  fs::remove(file);
  fs::create_symlink(outside / "x.pt", file);
  std::string e = expect_error([&] { mate::dump::load_tensor(c, c.inputs[0]); });
  EXPECT_NE(e.find(file.string() + " is a symbolic link"), std::string::npos) << e;
  // inputs/ that is a link (to a complete copy).
  fs::remove(file);
  fs::copy_file(outside / "x.pt", file);
  fs::copy(call / "inputs", outside / "inputs");
  fs::remove_all(call / "inputs");
  fs::create_directory_symlink(outside / "inputs", call / "inputs");
  e = expect_error([&] { mate::dump::load_tensor(c, c.inputs[0]); });
  EXPECT_NE(e.find((call / "inputs").string() + " is a symbolic link"), std::string::npos) << e;
  // call.json that is a link.
  fs::copy_file(call / "call.json", outside / "call.json");
  fs::remove(call / "call.json");
  fs::create_symlink(outside / "call.json", call / "call.json");
  e = expect_error([&] { mate::dump::read_call(call.string()); });
  EXPECT_NE(e.find((call / "call.json").string() + " is a symbolic link"), std::string::npos) << e;
  fs::remove(call / "call.json");
  fs::copy_file(outside / "call.json", call / "call.json");
  // A call directory that is a link: listed, and rejected by name.
  const fs::path moved = outside / call.filename();
  fs::rename(call, moved);
  fs::create_directory_symlink(moved, call);
  d = dirs();
  ASSERT_EQ(d.size(), 1u);
  e = expect_error([&] { mate::dump::read_call(d[0]); });
  EXPECT_NE(e.find(call.string() + " is a symbolic link"), std::string::npos) << e;
  // The directory named may be a link: to the root, or to the call directory itself.
  fs::remove(call);
  fs::rename(moved, call);
  fs::remove_all(call / "inputs");
  fs::copy(outside / "inputs", call / "inputs");
  fs::create_directory_symlink(root_ / "dumps", root_ / "root_link");
  d = mate::dump::find_call_dirs((root_ / "root_link").string());
  ASSERT_EQ(d.size(), 1u);
  c = mate::dump::read_call(d[0]);
  EXPECT_EQ(mate::dump::load_tensor(c, c.inputs[0]).data.size(), 8u);
  fs::create_directory_symlink(call, root_ / "call_link");
  d = mate::dump::find_call_dirs((root_ / "call_link").string());
  ASSERT_EQ(d.size(), 1u);
  c = mate::dump::read_call(d[0]);
  EXPECT_EQ(mate::dump::load_tensor(c, c.inputs[0]).data.size(), 8u);
}

// A FIFO in place of call.json is an error at once, not a reader blocked forever.
TEST_F(DumpTest, AFifoInPlaceOfCallJsonIsAnErrorNotAHang) {
  F32 x({1}, {1});
  skip_me(&x.dl);
  auto d = dirs();
  ASSERT_EQ(d.size(), 1u);
  const fs::path json_path = fs::path(d[0]) / "call.json";
  fs::remove(json_path);
  ASSERT_EQ(::mkfifo(json_path.c_str(), 0600), 0);
  try {
    mate::dump::read_call(d[0]);
    ADD_FAILURE() << "no DumpError";
  } catch (const mate::dump::DumpError& e) {
    EXPECT_NE(std::string(e.what()).find(json_path.string() + " is a FIFO, not a regular file"), std::string::npos) << e.what();
  }
}

// An existing dump root is used as it is: the banner says its mode rather than claiming it was
// created 0700, and a root other users can write to is warned about.
TEST_F(DumpTest, AnExistingWorldWritableRootIsUsedWithAWarning) {
  fs::create_directories(root_ / "dumps");
  ASSERT_EQ(::chmod((root_ / "dumps").c_str(), 0777), 0);
  F32 x({1}, {1});
  ::testing::internal::CaptureStderr();
  skip_me(&x.dl);
  skip_me(&x.dl);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("the directory is created with mode 0700"), std::string::npos) << err;
  EXPECT_NE(err.find("the existing directory has mode 0777"), std::string::npos) << err;
  EXPECT_NE(err.find("is writable by every user (mode 0777)"), std::string::npos) << err;
  EXPECT_EQ(err.find("writable by"), err.rfind("writable by")) << "one warning: " << err;
  EXPECT_EQ(mode_of(root_ / "dumps"), 0777u) << "used as it is";
  ASSERT_EQ(dirs().size(), 2u);
  EXPECT_EQ(mode_of(dirs()[0]), 0700u);
}

// Under umask 000 every directory MATE creates for dumps is still 0700, every file 0600.
TEST_F(DumpTest, UnderUmask000DirectoriesAre0700AndFiles0600) {
  const fs::path deep = root_ / "a" / "b" / "dumps";
  configure({{Var::MATE_DUMP_DIR, deep.string()}});
  const mode_t old = ::umask(0);
  F32 x({1, 2}, {2}), out({0, 0}, {2});
  ::testing::internal::CaptureStderr();
  add_one(&x.dl, &out.dl);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ::umask(old);
  EXPECT_NE(err.find("the directory is created with mode 0700"), std::string::npos) << err;
  for (const fs::path& p : {root_ / "a", root_ / "a" / "b", deep}) EXPECT_EQ(mode_of(p), 0700u) << p;
  const auto d = mate::dump::find_call_dirs(deep.string());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(mode_of(d[0]), 0700u);
  EXPECT_EQ(mode_of(fs::path(d[0]) / "inputs"), 0700u);
  EXPECT_EQ(mode_of(fs::path(d[0]) / "call.json"), 0600u);
  for (const auto& f : fs::directory_iterator(fs::path(d[0]) / "inputs")) EXPECT_EQ(mode_of(f.path()), 0600u) << f.path();
  EXPECT_EQ(mode_of(root_ / "log.txt"), 0600u) << "the log file too";
}

}  // namespace
