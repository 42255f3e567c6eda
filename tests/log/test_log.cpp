// In-process tests of the instrumentation: levels, records, exceptions, hooks, crash context.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "mate/config.hpp"
#include "mate/core/crash_context.hpp"
#include "mate/dump/call_record.hpp"
#include "mate/dump/dump.hpp"
#include "mate/log/api.hpp"
#include "dl_tensor.hpp"
#include "guard_test_mode.hpp"
#include "log_chained_calls.hpp"
#include "log_to_file.hpp"
#include "temp_dir.hpp"

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;

enum class Mode { Fast, Exact };
std::string_view to_string(Mode m) { return m == Mode::Fast ? "Fast" : "Exact"; }
enum class Plain { A = 7 };

using mate::testing::read_file;

// Points the log at a fresh file with the given level and format for one test.
class LogTest : public ::testing::Test, protected mate::testing::LogToFile {
 protected:
  LogTest() : LogToFile("mate_log_test") {}
  void TearDown() override { restore(); }
};

int evaluations = 0;
int counted(int v) {
  ++evaluations;
  return v;
}

int add(int a, int b) {
  return MATE_API("add", a, MATE_NAMED("b_evaluated", counted(b))).run([&] { return a + b; });
}

int plus_one(int v) {
  return MATE_API("plus_one", v).run([&] { return v + 1; });
}

// A 1-D f32 tensor of `values`.
struct Buffer : mate::testing::F32Tensor {
  explicit Buffer(const std::vector<float>& values)
      : F32Tensor(values, {static_cast<std::int64_t>(values.size())}) {}
};

void scale(const DLTensor* in, DLTensor* out, float factor) {
  MATE_API_SCOPE("Scale.run", in, out, factor);
  MATE_API_OUTPUTS(out);
  auto* o = static_cast<float*>(out->data);
  for (std::int64_t i = 0; i < out->shape[0]; ++i) o[i] = static_cast<const float*>(in->data)[i] * factor;
}

TEST_F(LogTest, LevelZeroWritesNothingAndDoesNotEvaluateArguments) {
  configure(0);
  evaluations = 0;
  EXPECT_EQ(add(2, 3), 5);
  EXPECT_EQ(evaluations, 0);
  EXPECT_EQ(mate::log::level(), 0);
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(LogTest, LevelOneIsOneLinePerCallWithSequenceNumbers) {
  configure(1);
  add(1, 1);
  add(2, 2);
  std::string text = log();
  std::istringstream lines(text);
  std::string l1, l2, l3;
  std::getline(lines, l1);
  std::getline(lines, l2);
  EXPECT_FALSE(std::getline(lines, l3));
  std::string pid = " pid " + std::to_string(getpid()) + " tid ";
  EXPECT_NE(l1.find(pid), std::string::npos) << l1;
  EXPECT_EQ(l1.back(), 'd');
  EXPECT_NE(l1.find("] add"), std::string::npos);
  auto seq = [](const std::string& l) { return std::stoull(l.substr(l.find('#') + 1)); };
  EXPECT_EQ(seq(l2), seq(l1) + 1);
}

TEST_F(LogTest, LevelThreeLogsNamedInputsOutputsAndReturnValue) {
  configure(3);
  Buffer in({1, 2, 3}), out({0, 0, 0});
  std::optional<int> none;
  std::optional<double> some = 2.5;
  std::vector<const DLTensor*> list{&in.dl, nullptr};
  DLManagedTensor managed{in.dl, nullptr, nullptr};
  auto r = MATE_API("Kitchen.sink", none, some, Mode::Fast, Plain::A, std::string("s"), true,
                    std::uint8_t{200}, list, &in.dl, &managed)
               .run([&] { return 7L; });
  EXPECT_EQ(r, 7L);
  scale(&in.dl, &out.dl, 2.0f);
  std::string text = log();
  for (const char* expected :
       {"] Kitchen.sink inputs\n", "  none: None (optional)\n", "  some: f64 2.5\n",
        "  Mode::Fast: enum Fast (0)\n", "  Plain::A: enum 7\n", "  std::string(\"s\"): str \"s\"\n",
        "  true: bool true\n", "  std::uint8_t{200}: u8 200\n", "  list: list of 2\n",
        "    [1]: None (tensor)\n", "  &managed: tensor f32 [3] strides [1] cpu contiguous va [", "] Kitchen.sink outputs (", "  return: i64 7\n",
        "] Scale.run inputs\n", "  factor: f32 2\n", "] Scale.run outputs ("}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing: " << expected << "\n" << text;
  }
  char va[128];
  auto lo = reinterpret_cast<std::uintptr_t>(in.data.data());
  std::snprintf(va, sizeof va, "  in: tensor f32 [3] strides [1] cpu contiguous va [%#lx, %#lx) 12 bytes\n",
                static_cast<unsigned long>(lo), static_cast<unsigned long>(lo + 12));
  EXPECT_NE(text.find(va), std::string::npos) << va << text;
  EXPECT_EQ(text.find("stats"), std::string::npos) << "no statistics below level 5";
}

// Dimensions, strides and sizes in decimal, across the digit counts (one and two digits are
// written by table lookup, the rest by to_chars) and signs.
TEST_F(LogTest, ATensorsNumbersAreWrittenInDecimal) {
  configure(3);
  std::vector<float> data(1);
  std::int64_t shape[] = {1, 9, 10, 99, 100, 0};
  std::int64_t strides[] = {0, -1, 10, 99, 100, -9223372036854775807LL - 1};
  DLTensor t{};
  t.data = data.data();
  t.device = {kDLCPU, 0};
  t.ndim = 6;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  t.strides = strides;
  std::int64_t shape1[] = {12345};
  std::int64_t strides1[] = {7};
  DLTensor t1 = t;
  t1.ndim = 1;
  t1.shape = shape1;
  t1.strides = strides1;
  MATE_API("Numbers", &t, &t1).run([] {});
  const std::string text = log();
  for (const char* expected :
       {"  &t: tensor f32 [1, 9, 10, 99, 100, 0] strides [0, -1, 10, 99, 100, -9223372036854775808] cpu contiguous va [",
        ") 0 bytes\n", "  &t1: tensor f32 [12345] strides [7] cpu non-contiguous va [", ") 345636 bytes\n"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing: " << expected << "\n" << text;
  }
}

// The logging path's calls go through a trampoline that must preserve every register
// (include/mate/log/api.hpp, cold_call): values the compiler keeps in registers across it, floats
// in vector registers among them, must come out intact. A chain of calls, each result feeding the
// next (log_chained_calls.cpp, built optimized), checked against the same arithmetic without
// logging; both forms, with and without .outputs() and .stream().
TEST_F(LogTest, ValuesLiveAcrossTheLoggingPathSurviveIt) {
  using mate::testing::chained_outputs;
  using mate::testing::chained_run;
  using mate::testing::chained_scope;
  for (int level : {3, 1, 0}) {
    configure(level);
    float a = 1.0f, b = 1.0f, ea = 1.0f, eb = 1.0f;
    double c = 0.25, ec = 0.25;
    Buffer out({0});
    for (int i = 0; i < 20; ++i) {
      a = chained_run(a, 0.75f, 0.5, i % 3);
      ea = static_cast<float>(ea * 0.5f + 0.75f * 0.5) + static_cast<float>(i % 3);
      b = chained_scope(b, 0.5f, 0.25, i % 2);
      eb = static_cast<float>(eb * 0.5f + 0.5f * 0.25) + static_cast<float>(i % 2);
      c = chained_outputs(c, 0.125f, &out.dl);
      ec = ec * 3.0 + 0.125f - ec + 0.125f;
      ASSERT_EQ(a, ea) << "level " << level << " call " << i;
      ASSERT_EQ(b, eb) << "level " << level << " call " << i;
      ASSERT_EQ(c, ec) << "level " << level << " call " << i;
    }
    if (level == 3) {
      const std::string text = log();
      EXPECT_NE(text.find("] chained_run outputs ("), std::string::npos) << text;
      EXPECT_NE(text.find("] chained_scope outputs ("), std::string::npos) << text;
      EXPECT_NE(text.find("] chained_outputs outputs ("), std::string::npos) << text;
    }
  }
}

TEST_F(LogTest, LevelFiveAddsStatisticsOfOutputsAfterTheCall) {
  configure(5);
  Buffer in({1, NAN, 3}), out({0, 0, 0});
  scale(&in.dl, &out.dl, 2.0f);
  std::string text = log();
  std::size_t outputs = text.find("Scale.run outputs");
  ASSERT_NE(outputs, std::string::npos) << text;
  EXPECT_NE(text.find("    stats: min 1 max 3 mean 2 nan 1 inf 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    stats: min 2 max 6 mean 4 nan 1 inf 0\n", outputs), std::string::npos) << text;
  EXPECT_NE(text.find("    stats: min 0 max 0 mean 0 nan 0 inf 0\n"), std::string::npos) << "out before the call";
}

// A tensor whose memory is gone (freed, or a device address described as CPU memory), passed to
// a call whose body never reads it: at level 5 and 10 the record is written with why there are
// no statistics (no data), and the program goes on, as at level 3. Before, reading it for the
// statistics ended the program before the inputs record existed.
float touches_nothing(const DLTensor* t) {
  return MATE_API("touches_nothing", t).run([] { return 1.0f; });
}

TEST_F(LogTest, MemoryThatCannotBeReadIsRecordedNotACrashAtLevelsFiveAndTen) {
  MATE_GUARD_INCOMPATIBLE("MATE's own fault handler (under the guard, the guard owns SIGSEGV and SIGBUS)");
  // Reserved unreadable (not unmapped: anything could map an unmapped range again meanwhile).
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* gone = ::mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  std::vector<std::int64_t> shape{256};
  const DLTensor t = mate::testing::dl_view(gone, mate::tensor::ScalarType::F32, shape);
  char at[32];
  std::snprintf(at, sizeof at, "%p", gone);

  configure(5);
  EXPECT_EQ(touches_nothing(&t), 1.0f);
  std::string text = log();
  // Where in the range the read faulted depends on the order of the kernel's loads: the range.
  EXPECT_NE(text.find("    stats unavailable: host memory not readable at 0x"), std::string::npos) << text;
  EXPECT_NE(text.find(std::string("(the tensor spans [") + at + ", "), std::string::npos) << text;
  EXPECT_NE(text.find("touches_nothing outputs"), std::string::npos) << text;

  configure(10);
  const std::string root = (dir_ / "dumps").string();
  overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_DUMP_DIR, root));
  mate::log::reconfigure();
  mate::dump::reconfigure();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(touches_nothing(&t), 1.0f);
  ::testing::internal::GetCapturedStderr();
  std::vector<std::string> calls = mate::dump::find_call_dirs(root);
  ASSERT_EQ(calls.size(), 1u);
  std::ifstream in(calls[0] + "/call.json");
  const auto call = nlohmann::json::parse(in);
  EXPECT_NE(call["inputs"][0].value("error", std::string()).find(std::string("(the tensor spans [") + at + ", "),
            std::string::npos)
      << call.dump(2);
  EXPECT_FALSE(call["inputs"][0].contains("file")) << call.dump(2);
  restore();
  mate::dump::reconfigure();  // the dump directory override is gone: no dump writer left behind
  ::munmap(gone, page);
}

TEST_F(LogTest, ExceptionsAreLoggedWithMessageAndRethrown) {
  configure(3);
  EXPECT_THROW(MATE_API("Boom.run").run([]() -> int { throw std::out_of_range("index 9 >= 4"); }), std::out_of_range);
  EXPECT_THROW(([] {
                 MATE_API_SCOPE("Boom.scope");
                 throw 42;
               }()),
               int);
  EXPECT_THROW(MATE_API("Boom.int").run([] { throw 7; }), int);
  std::string text = log();
  EXPECT_NE(text.find("us): an exception not derived from std::exception\n"), std::string::npos) << text;
  EXPECT_NE(text.find("] Boom.run exception ("), std::string::npos) << text;
  EXPECT_NE(text.find("us): std::out_of_range: index 9 >= 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("] Boom.scope exception ("), std::string::npos) << text;
  EXPECT_NE(text.find("unknown (an exception left the call"), std::string::npos) << text;
  EXPECT_EQ(text.find("Boom.run outputs"), std::string::npos);
}

// Strings from the program cannot fake records: control characters, backslashes and quotes are
// escaped as in JSON, so each record keeps its own lines.
TEST_F(LogTest, TextEscapesStringsSoTheyCannotFakeRecordLines) {
  configure(3);
  const std::string fake = "x\"\n[2026-01-01T00:00:00.000000Z pid 1 tid 1 #99] Fake.call inputs\n  y: \\ \t\x01";
  EXPECT_THROW(MATE_API("Quote.run", fake).run([&]() -> int { throw std::runtime_error("line one\nline \"two\""); }),
               std::runtime_error);
  const std::string text = log();
  EXPECT_NE(text.find("  fake: str \"x\\\"\\n[2026-01-01T00:00:00.000000Z pid 1 tid 1 #99] Fake.call inputs\\n  y: "
                      "\\\\ \\t\\u0001\"\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("us): std::runtime_error: line one\\nline \"two\"\n"), std::string::npos) << text;
  std::istringstream lines(text);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    EXPECT_TRUE(line.starts_with("[") || line.starts_with("  ")) << "a line of neither a header nor an argument: " << line;
  }
  EXPECT_EQ(n, 3) << "inputs header, one argument, exception header:\n" << text;
  EXPECT_EQ(text.find("Fake.call inputs\n"), std::string::npos) << text;
}

TEST_F(LogTest, JsonIsOneObjectPerLineWithTheSameFields) {
  configure(5, "json");
  Buffer in({1, 2}), out({0, 0});
  scale(&in.dl, &out.dl, 0.5f);
  std::istringstream lines(log());
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["fn"], "Scale.run");
  EXPECT_EQ(records[0]["event"], "inputs");
  EXPECT_EQ(records[0]["pid"], getpid());
  EXPECT_EQ(records[1]["event"], "outputs");
  EXPECT_EQ(records[1]["seq"], records[0]["seq"]);
  EXPECT_TRUE(records[1]["elapsed_us"].is_number());
  const auto& t = records[0]["args"][0];
  EXPECT_EQ(t["name"], "in");
  EXPECT_EQ(t["dtype"], "f32");
  EXPECT_EQ(t["shape"], nlohmann::json::array({2}));
  EXPECT_EQ(t["contiguous"], true);
  EXPECT_EQ(t["bytes"], 8);
  EXPECT_EQ(t["stats"]["mean"], 1.5);
  EXPECT_EQ(records[1]["args"][0]["stats"]["max"], 1.0);
}

struct RecordingHook : mate::log::CallHook {
  std::vector<std::string> seen;
  void before(const mate::log::CallInfo& call, const std::vector<mate::log::Arg>& inputs) override {
    seen.push_back(std::string("before ") + call.name + " " + std::to_string(inputs.size()));
  }
  void after(const mate::log::CallInfo& call, const std::vector<mate::log::Arg>& outputs,
             const mate::log::CallOutcome& outcome) override {
    seen.push_back(std::string("after ") + call.name + " " + std::to_string(outputs.size()) +
                   (outcome.threw ? " threw" : ""));
  }
};

TEST_F(LogTest, HooksSeeTheSameArgumentsAsTheLog) {
  configure(3);
  RecordingHook hook;
  mate::log::add_call_hook(&hook);
  Buffer in({1}), out({0});
  scale(&in.dl, &out.dl, 3.0f);
  mate::log::remove_call_hook(&hook);
  scale(&in.dl, &out.dl, 3.0f);
  EXPECT_EQ(hook.seen, (std::vector<std::string>{"before Scale.run 3", "after Scale.run 1"}));
}

// A hook is called only at its lowest_level() and above, in either format.
struct LevelFiveHook : RecordingHook {
  int lowest_level() const noexcept override { return 5; }
};

// Microseconds since the epoch of a record's "ts" ("2026-01-01T12:00:00.000123Z").
std::int64_t record_micros(const std::string& ts) {
  std::tm tm{};
  EXPECT_NE(strptime(ts.c_str(), "%Y-%m-%dT%H:%M:%S", &tm), nullptr) << ts;
  return static_cast<std::int64_t>(timegm(&tm)) * 1'000'000 + std::stoll(ts.substr(20, 6));
}

// A hook that takes its time before each call (as a level-10 dump's fsyncs do).
struct SlowHook : RecordingHook {
  void before(const mate::log::CallInfo& call, const std::vector<mate::log::Arg>& inputs) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    RecordingHook::before(call, inputs);
  }
};

// Each record's time is when it was written: a thread's records are in time order in the file,
// a nested call's inside its caller's, and a call's outputs come at least its reported wall time
// (which leaves out the work before the body) after its inputs.
TEST_F(LogTest, RecordTimesAreWhenTheRecordsWereWritten) {
  configure(3, "json");
  SlowHook hook;
  mate::log::add_call_hook(&hook);
  MATE_API("Outer.run", 1).run([] {
    MATE_API("Inner.run", 2).run([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
  });
  mate::log::remove_call_hook(&hook);
  std::istringstream lines(log());
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 4u);  // outer inputs, inner inputs, inner outputs, outer outputs
  EXPECT_EQ(records[0]["fn"], "Outer.run");
  EXPECT_EQ(records[3]["fn"], "Outer.run");
  for (std::size_t i = 1; i < records.size(); ++i)
    EXPECT_LE(record_micros(records[i - 1]["ts"]), record_micros(records[i]["ts"])) << records[i - 1] << "\n" << records[i];
  for (auto [in, out] : {std::pair{0, 3}, std::pair{1, 2}}) {
    const double elapsed = records[static_cast<std::size_t>(out)]["elapsed_us"].get<double>();
    EXPECT_GE(static_cast<double>(record_micros(records[static_cast<std::size_t>(out)]["ts"]) -
                                  record_micros(records[static_cast<std::size_t>(in)]["ts"])),
              elapsed - 1.0);  // each time is truncated to the microsecond
  }
  EXPECT_GE(record_micros(records[3]["ts"]) - record_micros(records[0]["ts"]), 40'000);  // two hooks' sleeps
}

TEST_F(LogTest, AHookIsCalledFromItsLowestLevelOn) {
  LevelFiveHook hook;
  mate::log::add_call_hook(&hook);
  Buffer in({1}), out({0});
  for (const char* format : {"text", "json"}) {
    configure(3, format);
    scale(&in.dl, &out.dl, 3.0f);
    EXPECT_TRUE(hook.seen.empty()) << format;
    configure(5, format);
    scale(&in.dl, &out.dl, 3.0f);
    EXPECT_EQ(hook.seen, (std::vector<std::string>{"before Scale.run 3", "after Scale.run 1"})) << format;
    hook.seen.clear();
  }
  mate::log::remove_call_hook(&hook);
}

TEST_F(LogTest, CrashContextNamesTheCallsInFlight) {
  configure(1);
  std::string path = path_ + ".ctx";
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  MATE_API("Outer.run").run([&] {
    MATE_API("inner").run([&] { mate::core::write_crash_context(fd); });
  });
  mate::core::write_crash_context(fd);  // nothing in flight any more
  ::close(fd);
  std::string ctx = read_file(path);
  std::filesystem::remove(path);
  EXPECT_NE(ctx.find("mate API call in flight on this thread: inner #"), std::string::npos) << ctx;
  EXPECT_NE(ctx.find(" (inside Outer.run #"), std::string::npos) << ctx;
  EXPECT_EQ(std::count(ctx.begin(), ctx.end(), '\n'), 1) << ctx;
}

// Level 1 (one line per call, no state of the call's own): a call whose body throws, nested
// calls and calls on several threads each leave their line, and nothing stays in flight.
TEST_F(LogTest, LevelOneCallsThatThrowOrRunOnThreadsLeaveTheirLinesAndNothingInFlight) {
  configure(1);
  EXPECT_THROW(MATE_API("thrower").run([]() -> int { throw std::runtime_error("no"); }), std::runtime_error);
  constexpr int kThreads = 4, kCalls = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < kCalls; ++i) MATE_API("outer").run([&] { return plus_one(i); });
    });
  for (std::thread& t : threads) t.join();
  const std::string path = path_ + ".ctx";
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  mate::core::write_crash_context(fd);
  ::close(fd);
  EXPECT_EQ(read_file(path), "") << "calls left in flight";
  std::filesystem::remove(path);
  const std::string text = log();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 2 * kThreads * kCalls) << text.substr(0, 500);
  EXPECT_NE(text.find("] thrower\n"), std::string::npos);
  std::size_t outer = 0, inner = 0;
  for (std::size_t at = text.find("] "); at != std::string::npos; at = text.find("] ", at + 1)) {
    outer += text.compare(at, 8, "] outer\n") == 0;
    inner += text.compare(at, 11, "] plus_one\n") == 0;
  }
  EXPECT_EQ(outer, static_cast<std::size_t>(kThreads * kCalls));
  EXPECT_EQ(inner, static_cast<std::size_t>(kThreads * kCalls));
}

// A call borrows its thread's settings (no reference counted per call). When a nested call on
// the same thread picks up new settings (reconfigure() in the body: another log file), the outer
// call's keep living until it ends: its outputs record goes to the file it started with.
TEST_F(LogTest, ACallKeepsItsSettingsWhenANestedCallPicksUpNewOnes) {
  configure(3);
  const std::string second = path_ + ".second";
  std::optional<ScopedOverride> second_destination;  // undone first, then restore() undoes configure's
  const float result = MATE_API("outer", 2.0f).run([&] {
    second_destination.emplace(Var::MATE_LOGDEST, second);
    mate::log::reconfigure();
    return MATE_API("inner", 1.0f).run([] { return 1.0f; });  // this thread's settings replaced here
  });
  EXPECT_EQ(result, 1.0f);
  second_destination.reset();
  restore();
  const std::string first_log = log(), second_log = read_file(second);
  EXPECT_NE(first_log.find("] outer inputs"), std::string::npos) << first_log;
  EXPECT_NE(first_log.find("] outer outputs"), std::string::npos) << first_log;
  EXPECT_EQ(first_log.find("inner"), std::string::npos) << first_log;
  EXPECT_NE(second_log.find("] inner inputs"), std::string::npos) << second_log;
  EXPECT_NE(second_log.find("] inner outputs"), std::string::npos) << second_log;
  EXPECT_EQ(second_log.find("outer"), std::string::npos) << second_log;
}

TEST_F(LogTest, InvalidConfigurationDisablesLoggingWithOneMessage) {
  overrides_.push_back(std::make_unique<ScopedOverride>(Var::MATE_LOGLEVEL, "2"));
  testing::internal::CaptureStderr();
  mate::log::reconfigure();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(mate::log::level(), 0);
  EXPECT_NE(err.find("mate: API logging disabled"), std::string::npos) << err;
  EXPECT_NE(err.find("MATE_LOGLEVEL"), std::string::npos) << err;
  EXPECT_EQ(add(1, 2), 3);
}

TEST_F(LogTest, SetLevelForTestingOverridesTheLatchedLevel) {
  configure(0);
  mate::log::set_level_for_testing(1);
  add(1, 2);
  mate::log::set_level_for_testing(0);
  add(1, 2);
  std::string text = log();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
}

}  // namespace
