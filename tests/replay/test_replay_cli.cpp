// `mate replay` as a user runs it: dumps from a separate program, replay with --lib.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mate/dump/call_record.hpp"
#include "recorded_va.hpp"
#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using mate::testing::run;

class ReplayCli : public ::testing::Test {
 protected:
  mate::testing::RunResult produce(const std::string& mode) {
    mate::testing::RunOptions o;
    o.env = {{"MATE_LOGLEVEL", "10"}, {"MATE_LOGDEST", (root_ / "log.txt").string()}, {"MATE_DUMP_DIR", dumps()}};
    return run({SAMPLE_PRODUCER, mode}, o);
  }
  mate::testing::RunResult replay(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), {MATE_BIN, "replay"});
    // The --lib libraries link MATE statically, and the program's copy of MATE's globals
    // interposes theirs by design (docs/dumps-and-replay.md). Under AddressSanitizer that is
    // reported as an ODR violation unless only differing sizes are (level 1). Other builds
    // ignore the variable.
    mate::testing::RunOptions o;
    o.env = std::move(env);
    o.env["ASAN_OPTIONS"] = "detect_odr_violation=1:detect_leaks=1";
    return run(args, o);
  }
  // Produces `mode` (inplace or overlap) and checks that its call.json records the address ranges
  // the producer printed ("va <argument> <lo> <hi>").
  void produce_with_ranges(const std::string& mode) {
    auto p = produce(mode);
    ASSERT_EQ(p.exit_code, 0) << p.err;
    std::map<std::string, mate::tensor::VaRange> ranges;
    std::istringstream lines(p.out);
    std::string word, name;
    std::uintptr_t lo = 0, hi = 0;
    while (lines >> word >> name >> lo >> hi)
      if (word == "va") ranges[name] = {lo, hi};
    ASSERT_EQ(ranges.size(), 2u) << p.out;
    const auto recorded = mate::testing::recorded_va(mate::dump::find_call_dirs(dumps()).at(0));
    ASSERT_EQ(recorded.size(), 2u);
    for (const auto& [n, va] : ranges) {
      EXPECT_EQ(recorded.at(n).lo, va.lo) << n;
      EXPECT_EQ(recorded.at(n).hi, va.hi) << n;
    }
  }
  std::string dumps() const { return (root_ / "dumps").string(); }
  mate::testing::TempDir tmp_{"mate_replay_cli"};
  fs::path root_{tmp_.path};
};

TEST_F(ReplayCli, DumpsOfAnExampleRunReplayAndPass) {
  auto p = produce("good");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.err.find("MATE_LOGLEVEL=10: dumping"), std::string::npos) << p.err;
  auto r = replay({"--dir", dumps(), "--lib", SAMPLE_LIB});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("sample.axpy  passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sample.scale_inplace  passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sample.sum  passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 passed, 0 failed\n"), std::string::npos) << r.out;
  // One call directory alone.
  auto one = replay({"--dir", mate::dump::find_call_dirs(dumps()).at(0), "--lib", SAMPLE_LIB});
  EXPECT_EQ(one.exit_code, 0) << one.out << one.err;
  EXPECT_NE(one.out.find("1 passed, 0 failed"), std::string::npos) << one.out;
}

TEST_F(ReplayCli, AChangedKernelReportsMismatchesAndExitsNonZero) {
  ASSERT_EQ(produce("good").exit_code, 0);
  auto r = replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("sample.axpy  mismatch: out: 6 of 6 elements differ, max abs error 0.5 at ["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 passed, 3 failed"), std::string::npos) << r.out;
  auto j = replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED, "--json", "--filter", "sample.axpy"});
  EXPECT_EQ(j.exit_code, 1);
  nlohmann::json doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["calls"].size(), 1u);
  EXPECT_EQ(doc["calls"][0]["result"], "mismatch");
  EXPECT_NEAR(doc["calls"][0]["outputs"][0]["max_abs_error"].get<double>(), 0.5, 1e-6);
  EXPECT_EQ(doc["failed"], 1);
  // A tolerance wide enough accepts it.
  EXPECT_EQ(replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED, "--filter", "sample.axpy", "--atol", "1"}).exit_code, 0);
}

// A dtype MATE does not decode (float8_e8m0fnu) is compared bit for bit without --exact; a
// difference is shown as the element's bits.
TEST_F(ReplayCli, AnUndecodedDtypeIsComparedBitForBit) {
  ASSERT_EQ(produce("e8m0").exit_code, 0);
  auto same = replay({"--dir", dumps(), "--lib", SAMPLE_LIB});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("sample.double_e8m0  passed"), std::string::npos) << same.out;
  auto changed = replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED});
  EXPECT_EQ(changed.exit_code, 1) << changed.out << changed.err;
  EXPECT_NE(changed.out.find("sample.double_e8m0  mismatch: out: 3 of 3 elements differ bit for bit, first at [0] "
                             "(got 0x82, expected 0x80)"),
            std::string::npos)
      << changed.out;
  auto j = replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED, "--json"});
  nlohmann::json doc = nlohmann::json::parse(j.out);
  const nlohmann::json& out = doc["calls"][0]["outputs"][0];
  EXPECT_EQ(out["compared"], "bits") << out.dump();
  EXPECT_EQ(out["got"], "0x82") << out.dump();
  EXPECT_EQ(out["expected"], "0x80") << out.dump();
  EXPECT_EQ(out["mismatched"], 3) << out.dump();
  EXPECT_FALSE(out.contains("max_abs_error")) << out.dump();
}

// Integer values are printed as JSON integers, exactly: 2^60 + 4 is not the double 2^60.
TEST_F(ReplayCli, JsonPrintsIntegerValuesAsExactIntegers) {
  ASSERT_EQ(produce("int").exit_code, 0);
  auto j = replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED, "--json"});
  EXPECT_EQ(j.exit_code, 1) << j.out << j.err;
  nlohmann::json doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["calls"].size(), 1u);
  const nlohmann::json& outputs = doc["calls"][0]["outputs"];
  ASSERT_EQ(outputs.size(), 2u) << outputs.dump();
  const std::int64_t recorded = (std::int64_t{1} << 60) + 2, got = (std::int64_t{1} << 60) + 4;
  for (const nlohmann::json& o : outputs) {
    SCOPED_TRACE(o.dump());
    ASSERT_TRUE(o["got"].is_number_integer());
    ASSERT_TRUE(o["expected"].is_number_integer());
    EXPECT_EQ(o["got"].get<std::int64_t>(), got);
    EXPECT_EQ(o["expected"].get<std::int64_t>(), recorded);
  }
  EXPECT_EQ(outputs[0]["name"], "out");
  EXPECT_EQ(outputs[1]["name"], "return");
  // As text, too: no exponent, no ".0".
  EXPECT_NE(j.out.find("\"got\": 1152921504606846980"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"expected\": 1152921504606846978"), std::string::npos) << j.out;
  // Negative values too (recorded -7 + 1, replayed -7 + 3).
  fs::remove_all(dumps());
  ASSERT_EQ(produce("negative").exit_code, 0);
  auto n = replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED, "--json"});
  nlohmann::json nd = nlohmann::json::parse(n.out);
  for (const nlohmann::json& o : nd["calls"][0]["outputs"]) {
    SCOPED_TRACE(o.dump());
    ASSERT_TRUE(o["got"].is_number_integer());
    EXPECT_EQ(o["got"].get<std::int64_t>(), -4);
    EXPECT_EQ(o["expected"].get<std::int64_t>(), -6);
  }
  EXPECT_NE(n.out.find("\"got\": -4,"), std::string::npos) << n.out;
  // Floating-point values stay numbers with a fraction where they have one.
  fs::remove_all(dumps());
  ASSERT_EQ(produce("good").exit_code, 0);
  auto f = replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED, "--json", "--filter", "sample.axpy"});
  nlohmann::json fd = nlohmann::json::parse(f.out);
  EXPECT_TRUE(fd["calls"][0]["outputs"][0]["got"].is_number_float()) << f.out;
}

// u64 values above the largest i64 stay exact unsigned integers: 2^63 + 8 is neither the double
// 2^63 nor a negative number.
TEST_F(ReplayCli, JsonPrintsUint64ValuesAboveTheLargestInt64Exactly) {
  ASSERT_EQ(produce("uint").exit_code, 0);
  auto j = replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED, "--json"});
  EXPECT_EQ(j.exit_code, 1) << j.out << j.err;
  nlohmann::json doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["calls"].size(), 1u);
  const nlohmann::json& outputs = doc["calls"][0]["outputs"];
  ASSERT_EQ(outputs.size(), 2u) << outputs.dump();
  const std::uint64_t recorded = (std::uint64_t{1} << 63) + 6, got = (std::uint64_t{1} << 63) + 8;
  for (const nlohmann::json& o : outputs) {
    SCOPED_TRACE(o.dump());
    ASSERT_TRUE(o["got"].is_number_unsigned());
    ASSERT_TRUE(o["expected"].is_number_unsigned());
    EXPECT_EQ(o["got"].get<std::uint64_t>(), got);
    EXPECT_EQ(o["expected"].get<std::uint64_t>(), recorded);
  }
  EXPECT_EQ(outputs[0]["mismatched"], 2);  // both elements: the second is 7 + 3 against 7 + 1
  EXPECT_NE(j.out.find("\"got\": 9223372036854775816"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"expected\": 9223372036854775814"), std::string::npos) << j.out;
}

// bool values compare exactly and print as the integers 0 and 1, as in the text report.
TEST_F(ReplayCli, JsonPrintsBoolValuesAsZeroAndOne) {
  ASSERT_EQ(produce("bool").exit_code, 0);
  auto same = replay({"--dir", dumps(), "--lib", SAMPLE_LIB});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  auto j = replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED, "--json"});
  EXPECT_EQ(j.exit_code, 1) << j.out << j.err;
  nlohmann::json doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["calls"].size(), 1u);
  const nlohmann::json& outputs = doc["calls"][0]["outputs"];
  ASSERT_EQ(outputs.size(), 2u) << outputs.dump();
  EXPECT_EQ(outputs[0]["name"], "out");
  EXPECT_EQ(outputs[0]["mismatched"], 2);  // recorded {false, true}, replayed {true, false}
  EXPECT_EQ(outputs[1]["name"], "return");
  for (const nlohmann::json& o : outputs) {
    SCOPED_TRACE(o.dump());
    ASSERT_TRUE(o["got"].is_number_integer());
    EXPECT_EQ(o["got"].get<int>(), 1);
    EXPECT_EQ(o["expected"].get<int>(), 0);
  }
}

TEST_F(ReplayCli, UnregisteredFunctionsRaisedAndCrashedCallsFail) {
  ASSERT_EQ(produce("good").exit_code, 0);
  auto r = replay({"--dir", dumps()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("is not registered (load the library that registers it with --lib PATH)"), std::string::npos) << r.out;

  fs::remove_all(dumps());
  ASSERT_EQ(produce("raise").exit_code, 0);
  r = replay({"--dir", dumps(), "--lib", SAMPLE_LIB});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("no reference"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 passed, 1 failed"), std::string::npos) << r.out;

  // A crash inside the body leaves the inputs and status inputs_saved.
  fs::remove_all(dumps());
  auto crash = produce("crash");
  EXPECT_NE(crash.term_signal, 0);
  auto dirs = mate::dump::find_call_dirs(dumps());
  ASSERT_EQ(dirs.size(), 1u);
  mate::dump::CallRecord c = mate::dump::read_call(dirs[0]);
  EXPECT_EQ(c.status, mate::dump::CallStatus::InputsSaved);
  EXPECT_EQ(mate::dump::load_tensor(c, c.inputs[0]).data.size(), 24u);
}

TEST_F(ReplayCli, CorruptDumpsAreClearPerCallErrors) {
  ASSERT_EQ(produce("good").exit_code, 0);
  auto dirs = mate::dump::find_call_dirs(dumps());
  std::ofstream(fs::path(dirs[0]) / "call.json") << "{\"format\": \"mate-du";
  auto r = replay({"--dir", dumps(), "--lib", SAMPLE_LIB});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("error: " + dirs[0] + "/call.json: not valid JSON"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 passed, 1 failed"), std::string::npos) << r.out;
}

// With many calls and one that crashes, the results so far are on screen, and the crashing
// call's name: each line's name is printed (and flushed) before the call runs.
TEST_F(ReplayCli, ACrashingCallLeavesTheResultsSoFarAndItsName) {
  ASSERT_EQ(produce("good").exit_code, 0);
  EXPECT_NE(produce("crash").term_signal, 0);  // a later process: replayed last
  const std::string crash_dir = fs::path(mate::dump::find_call_dirs(dumps()).at(3)).filename().string();
  auto r = replay({"--dir", dumps(), "--lib", SAMPLE_LIB});
  EXPECT_TRUE(r.term_signal != 0 || r.exit_code != 0) << r.out << r.err;
  EXPECT_NE(r.out.find("sample.axpy  passed\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sample.sum  passed\n"), std::string::npos) << r.out;
  const std::string last = crash_dir + "  sample.crash  ";
  ASSERT_GE(r.out.size(), last.size()) << r.out;
  EXPECT_EQ(r.out.substr(r.out.size() - last.size()), last) << r.out;
  // --json prints the document once every call is done; meanwhile stderr names each call.
  auto j = replay({"--dir", dumps(), "--lib", SAMPLE_LIB, "--json"});
  EXPECT_TRUE(j.term_signal != 0 || j.exit_code != 0) << j.out << j.err;
  EXPECT_NE(j.err.find("mate replay: replaying " + last.substr(0, last.size() - 2) + "\n"), std::string::npos) << j.err;
  auto whole = replay({"--dir", dumps(), "--lib", SAMPLE_LIB, "--json", "--filter", "sample.[as]*"});
  EXPECT_EQ(whole.exit_code, 0) << whole.out << whole.err;
  EXPECT_EQ(nlohmann::json::parse(whole.out)["passed"], 3);
}

// A dump of calls on cuda:1 (one rank per GPU) replays on device 1 where the driver has it, with
// device 1 current as it was (sample.current_device records which device is), is a clear error
// where the driver has no device 1, and replays on the device --device names (rank 3's dump on
// a one-GPU machine). The replayed call's own log record shows where its tensors were rebuilt.
TEST_F(ReplayCli, ADumpOfDeviceOneReplaysThereOrWhereDeviceSays) {
  mate::testing::RunOptions o;
  o.env = {{"MATE_LOGLEVEL", "10"},
           {"MATE_LOGDEST", (root_ / "log.txt").string()},
           {"MATE_DUMP_DIR", dumps()},
           {"MATE_FAKE_DRIVER_PATH", MATE_FAKE_DRIVER_LIBRARY},
           {"FAKE_DRIVER_DEVICE_COUNT", "2"}};
  auto p = run({SAMPLE_PRODUCER, "device1"}, o);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  std::map<std::string, std::string> env{{"MATE_FAKE_DRIVER_PATH", MATE_FAKE_DRIVER_LIBRARY},
                                         {"FAKE_DRIVER_DEVICE_COUNT", "2"},
                                         {"MATE_LOGLEVEL", "3"},
                                         {"MATE_LOGDEST", "stderr"}};
  auto two = replay({"--dir", dumps(), "--lib", SAMPLE_LIB}, env);
  EXPECT_EQ(two.exit_code, 0) << two.out << two.err;
  EXPECT_NE(two.out.find("sample.copy_or_throw  passed"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("sample.current_device  passed"), std::string::npos) << two.out;
  EXPECT_NE(two.err.find(" cuda:1 contiguous"), std::string::npos) << two.err;

  env["FAKE_DRIVER_DEVICE_COUNT"] = "1";
  auto one = replay({"--dir", dumps(), "--lib", SAMPLE_LIB}, env);
  EXPECT_EQ(one.exit_code, 1) << one.out << one.err;
  EXPECT_NE(one.out.find("the tensor was recorded on cuda:1, which replay cannot make memory on here ("),
            std::string::npos) << one.out;
  EXPECT_NE(one.out.find("device 1 requested but the driver sees 1 device(s)"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("--device N replays every device tensor on device N instead"), std::string::npos) << one.out;

  // On device 0 the kernels run there: the copy is the same, the current device is not.
  auto moved = replay({"--dir", dumps(), "--lib", SAMPLE_LIB, "--device", "0"}, env);
  EXPECT_EQ(moved.exit_code, 1) << moved.out << moved.err;
  EXPECT_NE(moved.out.find("sample.copy_or_throw  passed"), std::string::npos) << moved.out;
  EXPECT_NE(moved.out.find("sample.current_device  mismatch"), std::string::npos) << moved.out;
  EXPECT_NE(moved.out.find("got 0, expected 1"), std::string::npos) << moved.out;
  EXPECT_NE(moved.err.find(" cuda:0 contiguous"), std::string::npos) << moved.err;
  EXPECT_EQ(moved.err.find(" cuda:1 "), std::string::npos) << moved.err;
#ifdef MATE_REPLAY_HAVE_GUARD
  env["FAKE_DRIVER_DEVICE_COUNT"] = "2";
  auto guarded = replay({"--dir", dumps(), "--lib", SAMPLE_LIB, "--guard-alloc"}, env);
  EXPECT_EQ(guarded.exit_code, 0) << guarded.out << guarded.err;
  EXPECT_NE(guarded.out.find("sample.copy_or_throw  passed"), std::string::npos) << guarded.out;
  EXPECT_NE(guarded.out.find("sample.current_device  passed"), std::string::npos) << guarded.out;
#endif
}

// op(x, out=x), and a view of one buffer written as another view of it one element further on:
// the result depends on the aliasing, which replay rebuilds from the recorded address ranges.
TEST_F(ReplayCli, InPlaceAndOverlappingArgumentsShareMemoryAgain) {
  for (const std::string mode : {"inplace", "overlap"}) {
    SCOPED_TRACE(mode);
    fs::remove_all(dumps());
    produce_with_ranges(mode);
    auto r = replay({"--dir", dumps(), "--lib", SAMPLE_LIB});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("sample.prefix_step  passed"), std::string::npos) << r.out;
#ifdef MATE_REPLAY_HAVE_GUARD
    // On guarded memory too: one guarded allocation for the union.
    auto g = replay({"--dir", dumps(), "--lib", SAMPLE_LIB, "--guard-alloc"});
    EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
    EXPECT_NE(g.out.find("sample.prefix_step  passed"), std::string::npos) << g.out;
#endif
  }
}

// MATE_LOGLEVEL and MATE_DUMP_DIR still exported from the dumping run: replay does not dump the
// calls it replays (the next replay would replay them too), and log records stay off stdout.
TEST_F(ReplayCli, ReplayNeitherDumpsItsCallsNorLogsOntoItsResults) {
  ASSERT_EQ(produce("good").exit_code, 0);
  auto r = replay({"--dir", dumps(), "--lib", SAMPLE_LIB}, {{"MATE_LOGLEVEL", "10"}, {"MATE_DUMP_DIR", dumps()}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(mate::dump::find_call_dirs(dumps()).size(), 3u);
  EXPECT_EQ(r.err.find("dumping the inputs and outputs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sample.axpy inputs"), std::string::npos) << r.err;  // logged, at level 5, on stderr
  EXPECT_EQ(r.out.find("sample.axpy inputs"), std::string::npos) << r.out;
  auto again = replay({"--dir", dumps(), "--lib", SAMPLE_LIB});
  EXPECT_NE(again.out.find("3 passed, 0 failed"), std::string::npos) << again.out;
  // --json stays valid JSON with the log on (MATE_LOGDEST defaults to stdout).
  for (const std::string format : {"text", "json"}) {
    auto j = replay({"--dir", dumps(), "--lib", SAMPLE_LIB, "--json"}, {{"MATE_LOGLEVEL", "3"}, {"MATE_LOGFORMAT", format}});
    EXPECT_EQ(j.exit_code, 0) << j.out << j.err;
    EXPECT_EQ(nlohmann::json::parse(j.out, nullptr, false)["passed"], 3) << j.out;
    EXPECT_NE(j.err.find("sample.axpy"), std::string::npos) << j.err;
  }
  // A log file stays a log file.
  const std::string log = (root_ / "replay.log").string();
  auto f = replay({"--dir", dumps(), "--lib", SAMPLE_LIB, "--json"}, {{"MATE_LOGLEVEL", "3"}, {"MATE_LOGDEST", log}});
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_EQ(f.err.find("sample.axpy inputs"), std::string::npos) << f.err;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("sample.axpy inputs"), std::string::npos) << text.str();
}

// What was wrong with a tolerance, in a line: never CLI11's range with DBL_MAX in 300 digits,
// and never nan, which made every element fail.
TEST_F(ReplayCli, ToleranceFlagsSayWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"abc", "'abc' is not a number"}, {"nan", "'nan' is not finite"}, {"inf", "'inf' is not finite"},
      {"1e999", "'1e999' is not finite"}, {"-1", "'-1' is negative"}, {"1x", "'1x' is not a number"}};
  for (const char* flag : {"--rtol", "--atol"}) {
    for (const auto& [value, problem] : cases) {
      SCOPED_TRACE(std::string(flag) + " " + value);
      auto r = replay({"--dir", dumps(), flag, value});
      EXPECT_EQ(r.exit_code, 2);
      EXPECT_NE(r.err.find(std::string(flag) + ": " + problem + "; accepted: a finite number >= 0\n"), std::string::npos) << r.err;
      EXPECT_LT(r.err.size(), 200u) << r.err;
    }
  }
  ASSERT_EQ(produce("good").exit_code, 0);
  EXPECT_EQ(replay({"--dir", dumps(), "--lib", SAMPLE_LIB, "--rtol", "0", "--atol", "1e-3"}).exit_code, 0);
}

TEST_F(ReplayCli, UsageErrors) {
  EXPECT_EQ(replay({"--dir", (root_ / "nowhere").string()}).exit_code, 2);
  auto r = replay({"--dir", "x", "--rtol", "-1"});
  EXPECT_EQ(r.exit_code, 2);
  r = replay({"--dir", "x", "--guard-mode", "tail"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--guard-mode needs --guard-alloc"), std::string::npos) << r.err;
  for (const char* bad : {"-1", "cuda:1", "1024"}) {
    r = replay({"--dir", "x", "--device", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find(std::string("--device: '") + bad + "' is not a device ordinal; accepted: a number from 0 to 1023"),
              std::string::npos) << r.err;
  }
  r = replay({"--dir", "x", "--lib", "/nonexistent/libx.so"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot load --lib /nonexistent/libx.so"), std::string::npos) << r.err;
  // A bare name of a file in the current directory: dlopen does not look there; the error says so.
  fs::create_directories(root_ / "here");
  fs::copy_file(SAMPLE_LIB, root_ / "here" / "libsample_here.so");
  mate::testing::RunOptions in_here;
  in_here.cwd = (root_ / "here").string();
  in_here.env["LD_LIBRARY_PATH"] = "/nonexistent";  // an empty entry ("a:") would mean the current directory
  r = run({MATE_BIN, "replay", "--dir", "x", "--lib", "libsample_here.so"}, in_here);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not in the current directory: --lib ./libsample_here.so"), std::string::npos) << r.err;
  fs::create_directories(dumps());
  r = replay({"--dir", dumps()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no calls to replay in " + dumps() + ": a call is a directory holding call.json"),
            std::string::npos) << r.err;
  r = replay({"--dir", dumps(), "--json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no calls to replay in "), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["calls"].size(), 0u) << r.out;
}

// Whether Debian's interpreter with torch is there (the torch.save-format checks need it).
bool have_torch() {
  if (!fs::exists("/usr/bin/python3")) return false;
  return run({"/usr/bin/python3", "-c", "import torch, numpy"}, {}).exit_code == 0;
}

// The default dump format is torch.save's: torch.load(weights_only=True) opens every tensor
// file with its dtype, shape and strides (raw bytes for u32 and a negative stride, restored from
// call.json), the zips are valid, and replay restores every layout exactly.
TEST_F(ReplayCli, TorchSaveDumpsOpenWithTorchLoadAndReplayExactly) {
  auto p = produce("mixed");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const std::string call = mate::dump::find_call_dirs(dumps()).at(0);
  for (const char* f : {"inputs/00_a.pt", "inputs/01_b.pt", "inputs/02_c.pt", "inputs/07_h.pt", "inputs/08_k.pt", "outputs/00_out.pt"})
    EXPECT_TRUE(fs::is_regular_file(fs::path(call) / f)) << f;
  if (have_torch()) {
    const std::string expected = (root_ / "expected.json").string();
    std::ofstream(expected) << p.out;
    auto check = run({"/usr/bin/python3", CHECK_TORCH_LOAD, call, expected}, {});
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
    EXPECT_NE(check.out.find("ok: 9 tensors"), std::string::npos) << check.out;
  } else {
    std::cout << "[  NOTE    ] /usr/bin/python3 with torch and numpy not found: torch.load checks skipped\n";
  }
  auto r = replay({"--dir", dumps(), "--lib", SAMPLE_LIB});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("sample.mixed  passed"), std::string::npos) << r.out;
  auto changed = replay({"--dir", dumps(), "--lib", SAMPLE_LIB_CHANGED});
  EXPECT_EQ(changed.exit_code, 1) << changed.out;
  // (the u32 sum, 1.2e10, takes the changed bias within f32 tolerance: 8 of 9 differ)
  EXPECT_NE(changed.out.find("sample.mixed  mismatch: out: 8 of 9 elements differ"), std::string::npos) << changed.out;
}

// A damaged .pt file is that call's error, naming the file and the damage.
TEST_F(ReplayCli, DamagedTorchSaveFilesAreClearErrors) {
  ASSERT_EQ(produce("mixed").exit_code, 0);
  const fs::path call = mate::dump::find_call_dirs(dumps()).at(0);
  auto expect_error = [&](const fs::path& file, const std::string& what) {
    auto r = replay({"--dir", call.string(), "--lib", SAMPLE_LIB});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("sample.mixed  error: " + file.string() + ": " + what), std::string::npos) << r.out;
  };
  // One byte of the stored data flipped: the CRC-32 says so.
  const fs::path a = call / "inputs/00_a.pt";
  std::string bytes;
  {
    std::ifstream in(a, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string original = bytes;
  const std::size_t data = bytes.find(std::string("\x00\x00\x80\xbf", 4));  // -1.0f, the first value
  ASSERT_NE(data, std::string::npos);
  bytes[data + 3] = 0x3f;
  std::ofstream(a, std::ios::binary | std::ios::trunc) << bytes;
  expect_error(a, "entry archive/data/0: CRC-32 mismatch (the data is corrupt)");
  // Cut short: no end record any more.
  std::ofstream(a, std::ios::binary | std::ios::trunc) << original.substr(0, original.size() - 30);
  expect_error(a, "truncated or not a zip archive (no end of central directory record)");
  // Not a zip at all (an .mtensor, say).
  std::ofstream(a, std::ios::binary | std::ios::trunc) << "MATETNSR";
  expect_error(a, "truncated or not a zip archive: 8 bytes, shorter than a zip's end record");
}

#ifdef MATE_REPLAY_HAVE_GUARD
// The last "done when": a call that wrote out of bounds, replayed on guarded memory,
// dies with the guard's report naming the overflow.
TEST_F(ReplayCli, GuardAllocCatchesTheOutOfBoundsWriteOfAReplayedCall) {
  ASSERT_EQ(produce("oob").exit_code, 0);
  auto r = replay({"--dir", dumps(), "--lib", SAMPLE_LIB, "--guard-alloc", "--guard-mode", "tail"});
  // Died: by the signal, or (under ASan, whose SEGV handler the guard chains to) with an error exit.
  EXPECT_TRUE(r.term_signal != 0 || r.exit_code != 0) << r.out << r.err;
  EXPECT_NE(r.err.find("mate guard: overflow: SIGSEGV"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("past the end"), std::string::npos) << r.err;
  // Without the guard the same replay runs (the write lands in heap slack) and compares.
  auto plain = replay({"--dir", dumps(), "--lib", SAMPLE_LIB});
  EXPECT_EQ(plain.term_signal, 0) << plain.err;
}
#endif

}  // namespace
