// The detection matrix: both modes x sizes x bugs, each in a child process, over the host
// backend and through the driver backend on the fake driver (cu and mu prefixes). Each case
// asserts the report's kind, allocation id and offsets, and whether it was caught at the access
// (a guard fault, SIGSEGV) or at free (canary, SIGABRT).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <regex>
#include <string>
#include <tuple>

#include "subprocess.hpp"

namespace {

using ::testing::HasSubstr;

struct Target {
  unsigned long long id = 0;
  std::size_t a = 0, g = 0;
};

Target parse_target(const std::string& out) {
  Target t;
  unsigned long long user = 0;
  auto pos = out.find("target #");
  if (pos != std::string::npos)
    std::sscanf(out.c_str() + pos, "target #%llu user=0x%llx A=%zu G=%zu", &t.id, &user, &t.a, &t.g);
  return t;
}

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

using Param = std::tuple<std::string, std::string, std::size_t, std::string>;

class DetectionMatrix : public ::testing::TestWithParam<Param> {};

TEST_P(DetectionMatrix, ReportNamesKindIdAndOffset) {
  const auto& [backend, mode, size, bug] = GetParam();
  mate::testing::RunOptions options;
  if (backend != "host") options.env["MATE_FAKE_DRIVER_PATH"] = MATE_FAKE_DRIVER_LIBRARY;
  auto r = mate::testing::run({MATE_GUARD_CHILD, backend, mode, std::to_string(size), bug}, options);
  Target t = parse_target(r.out);
  ASSERT_EQ(t.id, 2u) << r.out << r.err;
  const std::string id = "allocation #" + std::to_string(t.id) + " of " + std::to_string(size) + " bytes";
  const std::size_t rounded = round_up(size, t.a), mapped = round_up(rounded, t.g);
  // Bytes of canary between the logical end and the trailing guard, and before the start.
  const std::size_t slack_after = mode == "tail" ? rounded - size : mapped - size;
  const std::size_t slack_before = mode == "tail" ? mapped - rounded : 0;
  // Died: by the signal, or (under sanitizers, whose handler we chain to) with an error exit.
  const bool died = r.term_signal != 0 || r.exit_code != 0;
  // Every report carries the crash context other components register (API logging).
  EXPECT_THAT(r.err, HasSubstr("  in flight: guard_child kernel\n")) << r.err;
  EXPECT_TRUE(died) << r.out << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("done")));

  auto expect_fault = [&](const std::string& kind, const std::string& offset) {
    EXPECT_THAT(r.err, HasSubstr("mate guard: " + kind + ": SIGSEGV on ")) << r.err;
    EXPECT_THAT(r.err, HasSubstr(offset + id)) << r.err;
    EXPECT_THAT(r.err, HasSubstr("(" + mode + " mode, " + (backend == "host" ? "host" : backend == "cu" ? "cuda" : "musa")))
        << r.err;
    EXPECT_THAT(r.err, HasSubstr("  allocated by thread ")) << r.err;
    if (r.term_signal != 0) {
      EXPECT_EQ(r.term_signal, SIGSEGV);
    }
  };
  auto expect_canary = [&](const std::string& side, const std::string& first) {
    EXPECT_THAT(r.err, HasSubstr("mate guard: canary corrupted at free: " + id)) << r.err;
    EXPECT_THAT(r.err, HasSubstr("  side: " + side)) << r.err;
    EXPECT_THAT(r.err, HasSubstr("  first corrupted byte: " + first)) << r.err;
    if (mode == "tail" && side.rfind("past the end", 0) == 0) {
      EXPECT_THAT(r.err, HasSubstr("the write stayed within the alignment padding after the end")) << r.err;
    } else {
      EXPECT_THAT(r.err, HasSubstr("rerun in " + std::string(mode == "tail" ? "head" : "tail") + " mode")) << r.err;
    }
    EXPECT_EQ(r.term_signal, SIGABRT);
  };

  if (bug.rfind("overflow", 0) == 0) {
    const std::size_t by = bug == "overflow1" ? 1 : bug == "overflowA" ? t.a : t.g;
    const std::string past = std::to_string(by - 1) + " bytes past the end";
    if (by - 1 >= slack_after) {
      expect_fault("overflow", past + " of ");
    } else {
      expect_canary("past the end (overflow)", past);
    }
  } else if (bug == "underrun1") {
    if (slack_before == 0) {
      expect_fault("underrun", "1 bytes before the start of ");
    } else {
      expect_canary("before the start (underrun)", "1 bytes before the start");
    }
  } else if (bug == "uaf") {
    expect_fault("use-after-free", "0 bytes from the start of freed ");
    EXPECT_THAT(r.err, HasSubstr("  freed by thread ")) << r.err;
  } else if (bug == "double_free") {
    EXPECT_THAT(r.err, HasSubstr("mate guard: double free of ")) << r.err;
    EXPECT_THAT(r.err, HasSubstr(id)) << r.err;
    EXPECT_THAT(r.err, HasSubstr("was already freed")) << r.err;
    EXPECT_THAT(r.err, HasSubstr("  first freed by thread ")) << r.err;
    EXPECT_EQ(r.term_signal, SIGABRT);
  } else if (bug == "invalid_free") {
    EXPECT_THAT(r.err, HasSubstr("mate guard: invalid free of ")) << r.err;
    EXPECT_THAT(r.err, HasSubstr("not a pointer this allocator returned; it lies ")) << r.err;
    EXPECT_THAT(r.err, HasSubstr("live allocation #2 of " + std::to_string(size) + " bytes")) << r.err;
    EXPECT_EQ(r.term_signal, SIGABRT);
  }
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [backend, mode, size, bug] = info.param;
  return backend + "_" + mode + "_" + std::to_string(size) + "_" + bug;
}

INSTANTIATE_TEST_SUITE_P(
    Guard, DetectionMatrix,
    ::testing::Combine(::testing::Values("host", "cu", "mu"), ::testing::Values("tail", "head"),
                       ::testing::Values(1, 15, 16, 17, 4095, 4096, 4097, 65537),
                       ::testing::Values("overflow1", "overflowA", "overflowG", "underrun1", "uaf",
                                         "double_free", "invalid_free")),
    name);

TEST(DetectionMatrixClean, CorrectProgramRunsToTheEnd) {
  for (const char* backend : {"host", "cu", "mu"}) {
    mate::testing::RunOptions options;
    if (std::string(backend) != "host") options.env["MATE_FAKE_DRIVER_PATH"] = MATE_FAKE_DRIVER_LIBRARY;
    auto r = mate::testing::run({MATE_GUARD_CHILD, backend, "tail", "17", "clean"}, options);
    EXPECT_EQ(r.exit_code, 0) << backend << r.err;
    EXPECT_THAT(r.out, HasSubstr("done"));
    EXPECT_EQ(r.err, "");
  }
}

}  // namespace
