// The test suite's guard mode (guard_test_mode.hpp) as a developer uses it: the probe program's
// tests run as child processes with the flags and variables of seed 001's test-suite section.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "guard_test_mode.hpp"
#include "subprocess.hpp"

namespace {

using mate::testing::run;
using mate::testing::RunOptions;
using mate::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::Not;

RunResult probe(const std::string& test, std::vector<std::string> flags = {}, RunOptions options = {}) {
  std::vector<std::string> argv{MATE_GUARD_MODE_PROBE, "--gtest_filter=Probe." + test};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return run(argv, options);
}

class GuardTestMode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mate::testing::kSanitizerBuild) GTEST_SKIP() << "the guard preload cannot run under a sanitizer";
  }
};

TEST_F(GuardTestMode, OffByDefault) {
  auto r = probe("SaysWhetherItRunsGuarded");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("guarded=0"));
  EXPECT_THAT(r.err, Not(HasSubstr("guarded allocator")));
}

TEST_F(GuardTestMode, FlagRunsTheTestsGuarded) {
  auto r = probe("SaysWhetherItRunsGuarded", {"--guard-alloc"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("guarded=1"));
  EXPECT_THAT(r.err, HasSubstr("[mate tests] guarded allocator in force: tail mode, allocation log off"));
}

TEST_F(GuardTestMode, VariablesSetTheDefaults) {
  RunOptions options;
  options.env = {{"MATE_PYTEST_GUARD_ALLOC", "1"}, {"MATE_PYTEST_GUARD_MODE", "head"},
                 {"MATE_PYTEST_GUARD_LOG_ALLOCATIONS", "yes"}};
  auto r = probe("SaysWhetherItRunsGuarded", {}, options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("guarded=1"));
  EXPECT_THAT(r.err, HasSubstr("guarded allocator in force: head mode, allocation log on"));
  EXPECT_THAT(r.err, HasSubstr("mate guard: alloc #"));  // the allocation log itself
}

TEST_F(GuardTestMode, FlagsOverrideTheVariables) {
  RunOptions options;
  options.env = {{"MATE_PYTEST_GUARD_ALLOC", "1"}, {"MATE_PYTEST_GUARD_MODE", "head"}};
  auto off = probe("SaysWhetherItRunsGuarded", {"--no-guard-alloc"}, options);
  EXPECT_EQ(off.exit_code, 0) << off.err;
  EXPECT_THAT(off.out, HasSubstr("guarded=0"));
  auto tail = probe("SaysWhetherItRunsGuarded", {"--guard-mode=tail"}, options);
  EXPECT_THAT(tail.err, HasSubstr("guarded allocator in force: tail mode"));
}

// The point of it all: a heap bug in a test that passes unguarded ends with the guard's report.
TEST_F(GuardTestMode, CatchesAnOverflowInATest) {
  auto plain = probe("WritesOnePastAHeapBuffer");
  EXPECT_EQ(plain.exit_code, 0) << "the bug goes unnoticed without the guard\n" << plain.err;
  auto r = probe("WritesOnePastAHeapBuffer", {"--guard-alloc"});
  EXPECT_EQ(r.term_signal, 11) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[ RUN      ] Probe.WritesOnePastAHeapBuffer"));
  EXPECT_THAT(r.err, HasSubstr("mate guard: overflow: SIGSEGV on a write to "));
  EXPECT_THAT(r.err, HasSubstr("0 bytes past the end of allocation #"));
  EXPECT_THAT(r.err, HasSubstr(" of 256 bytes at ["));
}

TEST_F(GuardTestMode, CatchesAnUnderrunInHeadMode) {
  auto r = probe("WritesOneBeforeAHeapBuffer", {"--guard-alloc", "--guard-mode", "head"});
  EXPECT_EQ(r.term_signal, 11) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mate guard: underrun: SIGSEGV on a write to "));
  EXPECT_THAT(r.err, HasSubstr("4 bytes before the start of allocation #"));
  EXPECT_THAT(r.err, HasSubstr("(head mode, host memory"));
}

TEST_F(GuardTestMode, SkipsTestsMarkedIncompatible) {
  auto plain = probe("MarkedIncompatible");
  EXPECT_THAT(plain.out, HasSubstr("the incompatible test ran"));
  auto r = probe("MarkedIncompatible", {"--guard-alloc"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("the incompatible test ran")));
  EXPECT_THAT(r.out, HasSubstr("guard allocator debug mode does not support this probe's own allocator"));
  EXPECT_THAT(r.out, HasSubstr("[  SKIPPED ] Probe.MarkedIncompatible"));
}

// Under `mate guard-run` the tests run guarded without the flag, and a flag asking for the other
// mode is refused rather than silently ignored.
TEST_F(GuardTestMode, KnowsWhenMateGuardRunStartedIt) {
  auto r = run({MATE_BINARY, "guard-run", "--mode", "head", "--", MATE_GUARD_MODE_PROBE,
                "--gtest_filter=Probe.SaysWhetherItRunsGuarded"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("guarded=1"));
  auto conflict = run({MATE_BINARY, "guard-run", "--mode", "head", "--", MATE_GUARD_MODE_PROBE, "--guard-alloc",
                       "--guard-mode", "tail"});
  EXPECT_EQ(conflict.exit_code, 2);
  EXPECT_THAT(conflict.err, HasSubstr("already runs under the guarded allocator in head mode"));
  EXPECT_THAT(conflict.err, HasSubstr("but tail mode was asked for"));
}

// A default is not a choice: with only MATE_PYTEST_GUARD_ALLOC=1 exported (the seed's debug
// session), `mate guard-run --mode head` decides the mode. A chosen allocation log that differs
// from the one in force is refused like a mode.
TEST_F(GuardTestMode, UnderMateGuardRunOnlyAChoiceCanConflict) {
  RunOptions options;
  options.env = {{"MATE_PYTEST_GUARD_ALLOC", "1"}};
  auto r = run({MATE_BINARY, "guard-run", "--mode", "head", "--", MATE_GUARD_MODE_PROBE,
                "--gtest_filter=Probe.SaysWhetherItRunsGuarded"}, options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("guarded allocator in force: head mode, allocation log off"));
  auto log = run({MATE_BINARY, "guard-run", "--", MATE_GUARD_MODE_PROBE, "--guard-log-allocations"});
  EXPECT_EQ(log.exit_code, 2);
  EXPECT_THAT(log.err, HasSubstr("already runs under the guarded allocator with its allocation log off"));
}

// ctest's discovery lists the tests; a listing is never re-executed.
TEST_F(GuardTestMode, ListingIsTheSame) {
  auto plain = run({MATE_GUARD_MODE_PROBE, "--gtest_list_tests"});
  auto guarded = run({MATE_GUARD_MODE_PROBE, "--gtest_list_tests", "--guard-alloc"});
  EXPECT_EQ(guarded.exit_code, 0) << guarded.err;
  EXPECT_EQ(guarded.out, plain.out);
  EXPECT_EQ(guarded.err, "");
}

// Bad values are refused before any test runs (these need no preload: no skip under ASan).
TEST(GuardTestModeInput, BadModeFlagIsRefused) {
  auto r = probe("SaysWhetherItRunsGuarded", {"--guard-alloc", "--guard-mode", "middle"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--guard-mode: guard mode \"middle\" is not accepted; accepted: tail, head"));
  auto missing = probe("SaysWhetherItRunsGuarded", {"--guard-mode"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--guard-mode needs a value: tail or head"));
}

// A mistyped flag would otherwise reach GoogleTest, which ignores it: the run would pass unguarded.
TEST(GuardTestModeInput, UnknownGuardFlagIsRefused) {
  auto r = probe("SaysWhetherItRunsGuarded", {"--guard-allocs"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown flag --guard-allocs; accepted: --guard-alloc, --no-guard-alloc"));
}

TEST(GuardTestModeInput, BadVariableIsRefused) {
  RunOptions options;
  options.env = {{"MATE_PYTEST_GUARD_ALLOC", "sometimes"}};
  auto r = probe("SaysWhetherItRunsGuarded", {}, options);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("MATE_PYTEST_GUARD_ALLOC"));
  EXPECT_THAT(r.err, HasSubstr("sometimes"));
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
TEST(GuardTestModeInput, SanitizerBuildRefusesGuardMode) {
  auto r = probe("SaysWhetherItRunsGuarded", {"--guard-alloc"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("needs a build without AddressSanitizer or ThreadSanitizer"));
}
#endif

}  // namespace
