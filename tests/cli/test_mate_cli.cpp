// The `mate` program as a user runs it: exit codes, messages, and `mate env` in every form.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "mate/config.hpp"
#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using mate::testing::run;
using mate::testing::RunOptions;

mate::testing::RunResult mate_cmd(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), MATE_BINARY);
  return run(args, RunOptions{std::move(env), std::nullopt, std::nullopt});
}

TEST(MateCli, HelpListsSubcommandsWithOneLineEach) {
  auto r = mate_cmd({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("env"));
  EXPECT_THAT(r.out, HasSubstr("Show MATE environment variables"));
  EXPECT_THAT(r.out, HasSubstr("version"));
}

TEST(MateCli, NoSubcommandOrUnknownOptionIsUsageError) {
  EXPECT_EQ(mate_cmd({}).exit_code, 2);
  auto r = mate_cmd({"env", "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--bogus"));
  auto unknown = mate_cmd({"enb"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown command 'enb'; the commands are env, "));
}

TEST(MateCli, UnknownOptionBeforeTheCommandIsNamed) {
  auto r = mate_cmd({"--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown option '--bogus'; before a command mate takes only --help and --version"));
}

TEST(MateCli, VersionFlagPrintsTheVersion) {
  auto r = mate_cmd({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "mate " MATE_VERSION "\n");
}

TEST(MateCli, VersionSaysVersionBuildCompilerAndBackends) {
  auto r = mate_cmd({"version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("mate " MATE_VERSION));
  EXPECT_THAT(r.out, HasSubstr("build type: "));
  EXPECT_THAT(r.out, HasSubstr("compiler: GNU"));
  EXPECT_THAT(r.out, HasSubstr("device backends: "));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("statistics kernels: (baseline|AVX2|AVX-512)\n"));
}

TEST(MateEnv, ShowsOnlyVisibleVariablesWithValidity) {
  auto r = mate_cmd({"env"}, {{"MATE_LOGLEVEL", "3"}, {"MATE_DUMP_DIR", "/tmp/d"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("MATE_LOGLEVEL=3\n    ok"));
  EXPECT_THAT(r.out, HasSubstr("MATE_DUMP_DIR=/tmp/d\n    ok"));
  EXPECT_THAT(r.out, Not(HasSubstr("MATE_DEEPGEMM_MK_ALIGNMENT")));
}

TEST(MateEnv, NothingSetSaysSo) {
  auto r = mate_cmd({"env"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("No MATE-related variables are set"));
}

TEST(MateEnv, CheckFailsOnInvalidValueNamingVariableValueAndAccepted) {
  auto r = mate_cmd({"env", "--check"}, {{"MATE_LOGLEVEL", "4"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("MATE_LOGLEVEL='4' is invalid"));
  EXPECT_THAT(r.err, HasSubstr("one of 0, 1, 3, 5, 10"));
  EXPECT_EQ(mate_cmd({"env", "--check"}, {{"MATE_LOGLEVEL", "5"}}).exit_code, 0);
}

// Paths that parse but cannot serve: a file where a directory goes, a directory or a missing
// absolute path where a compiler goes.
TEST(MateEnv, CheckFailsOnPathsTheRuntimeWouldReject) {
  const mate::testing::TempDir dir;
  const std::string file = dir.path + "/a_file";
  { std::ofstream(file) << "x"; }
  auto r = mate_cmd({"env", "--check"}, {{"MATE_DUMP_DIR", file}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("MATE_DUMP_DIR='" + file + "' is invalid: it exists and is not a directory"));
  // A path through a file can never be made (issue 23 item 8).
  for (const char* var : {"MATE_DUMP_DIR", "MATE_WORKSPACE_BASE"}) {
    r = mate_cmd({"env", "--check"}, {{var, file + "/sub/dir"}});
    EXPECT_EQ(r.exit_code, 1) << var;
    EXPECT_THAT(r.err, HasSubstr(std::string(var) + "='" + file + "/sub/dir' is invalid: " + file + " is not a directory"));
  }
  r = mate_cmd({"env", "--check"}, {{"MATE_DUMP_DIR", dir.path + "/new/sub"}});  // made when missing
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = mate_cmd({"env", "--check"}, {{"MATE_NVCC", dir.path}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("is invalid: a directory; accepted: the compiler's path"));
  r = mate_cmd({"env", "--check"}, {{"MATE_MCC", "/nonexistent/mcc"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("MATE_MCC='/nonexistent/mcc' is invalid: no such file"));
  // A directory not made yet is fine (made on first use), as is a compiler found on PATH.
  EXPECT_EQ(mate_cmd({"env", "--check"}, {{"MATE_DUMP_DIR", file + ".d/dumps"}, {"MATE_NVCC", "nvcc"}}).exit_code, 0);
  // A bare name is looked for on PATH, not in the current directory (where a directory "nvcc" is).
  std::filesystem::create_directory(dir.path + "/nvcc");
  mate::testing::RunOptions in_dir{{{"MATE_NVCC", "nvcc"}}, std::nullopt, dir.path};
  EXPECT_EQ(run({MATE_BINARY, "env", "--check"}, in_dir).exit_code, 0);
}

TEST(MateEnv, UnknownVariableWarnsOnceWithSuggestion) {
  auto r = mate_cmd({"env"}, {{"MATE_LOGLEVL", "3"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("unknown environment variable MATE_LOGLEVL (did you mean MATE_LOGLEVEL?)"));
  std::size_t first = r.err.find("MATE_LOGLEVL");
  EXPECT_EQ(r.err.find("unknown environment variable", first + 1), std::string::npos) << r.err;
  EXPECT_THAT(r.out, HasSubstr("did you mean MATE_LOGLEVEL?"));
  EXPECT_EQ(mate_cmd({"env", "--check"}, {{"MATE_LOGLEVL", "3"}}).exit_code, 1);
}

TEST(MateEnv, UnknownVariableWarningCanBeSilenced) {
  auto r = mate_cmd({"version"}, {{"MATE_LOGLEVL", "3"}, {"MATE_WARN_UNKNOWN_ENV", "0"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.err, Not(HasSubstr("unknown environment variable")));
}

TEST(MateEnv, AllListsEverySeedVariableWithDefaultAndSource) {
  auto r = mate_cmd({"env", "--all"}, {{"MATE_DEEPGEMM_MK_ALIGNMENT", "256"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("MATE_LOGLEVEL  [int, public, read once]\n    value:   0 (default)\n    default: 0"));
  EXPECT_THAT(r.out, HasSubstr("MATE_DEEPGEMM_MK_ALIGNMENT  [int, public, read once]\n    value:   256 (environment)"));
  EXPECT_THAT(r.out, HasSubstr("MATE_WORKSPACE_BASE"));
  EXPECT_THAT(r.out, HasSubstr("default: home directory"));
  // Internal and test-only variables only with --internal.
  EXPECT_THAT(r.out, Not(HasSubstr("MATE_GUARD_ALLOCATOR_MODE")));
  auto internal = mate_cmd({"env", "--all", "--internal"});
  for (const auto& v : mate::config::all_variables())
    EXPECT_THAT(internal.out, HasSubstr(std::string(v.name) + "  [")) << v.name;
}

TEST(MateEnv, JsonCarriesTheSameFields) {
  auto r = mate_cmd({"env", "--json", "--all", "--internal"}, {{"MATE_LOGLEVEL", "4"}, {"MATE_LOGLEVL", "1"}});
  EXPECT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["variables"].size(), mate::config::all_variables().size());
  bool seen = false;
  for (const auto& v : j["variables"]) {
    if (v["name"] != "MATE_LOGLEVEL") continue;
    seen = true;
    EXPECT_EQ(v["value"], "4");
    EXPECT_EQ(v["source"], "environment");
    EXPECT_EQ(v["valid"], false);
    EXPECT_THAT(v["error"].get<std::string>(), HasSubstr("one of 0, 1, 3, 5, 10"));
    EXPECT_EQ(v["default"], "0");
    EXPECT_EQ(v["type"], "int");
  }
  EXPECT_TRUE(seen);
  ASSERT_EQ(j["unknown"].size(), 1u);
  EXPECT_EQ(j["unknown"][0]["suggestion"], "MATE_LOGLEVEL");
}

TEST(MateEnv, JsonStaysJsonWhenAValueIsNotUtf8) {
  // A shell can put any byte in a variable; JSON text cannot hold it: replaced by U+FFFD.
  auto r = mate_cmd({"env", "--json"}, {{"MATE_LOGLEVEL", "3\xff"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  bool found = false;
  for (const auto& v : doc["variables"])
    if (v["name"] == "MATE_LOGLEVEL") {
      found = true;
      EXPECT_EQ(v["value"], "3\xef\xbf\xbd");
    }
  EXPECT_TRUE(found) << r.out;
}

TEST(MateEnv, JsonValueOfAnUnsetVariableIsItsDefaultOrNull) {
  auto j = nlohmann::json::parse(mate_cmd({"env", "--json", "--all"}).out);
  std::map<std::string, nlohmann::json> value;
  for (const auto& v : j["variables"]) value[v["name"].get<std::string>()] = v["value"];
  EXPECT_EQ(value["MATE_LOGLEVEL"], "0");
  EXPECT_TRUE(value["MATE_DUMP_INCLUDE"].is_null());  // not the text "empty"
  EXPECT_TRUE(value["MATE_WORKSPACE_BASE"].is_null());
}

TEST(MateEnv, CheckSeesTheShardIndexBeyondTheTotal) {
  auto r = mate_cmd({"env", "--check"}, {{"MATE_PYTEST_SHARD_INDEX", "5"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("MATE_PYTEST_SHARD_INDEX=5 is not below MATE_PYTEST_SHARD_TOTAL=1"));
  EXPECT_EQ(mate_cmd({"env", "--check"}, {{"MATE_PYTEST_SHARD_INDEX", "5"}, {"MATE_PYTEST_SHARD_TOTAL", "6"}}).exit_code, 0);
}

TEST(MateEnv, NumbersTooLargeAreOutOfRange) {
  auto r = mate_cmd({"env", "--check"}, {{"MATE_DUMP_MAX_COUNT", "99999999999999999999"}, {"MATE_DUMP_MAX_SIZE_GB", "1e400"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("MATE_DUMP_MAX_COUNT='99999999999999999999' is invalid: out of range; "
                               "accepted: an integer from 0 to 9223372036854775807"));
  EXPECT_THAT(r.err, HasSubstr("MATE_DUMP_MAX_SIZE_GB='1e400' is invalid: out of range"));
}

TEST(MateEnv, AnInvalidWarnUnknownEnvIsSaid) {
  auto r = mate_cmd({"version"}, {{"MATE_WARN_UNKNOWN_ENV", "x"}, {"MATE_LOGLEVL", "1"}});
  EXPECT_THAT(r.err, HasSubstr("MATE_WARN_UNKNOWN_ENV='x' is invalid"));
  EXPECT_THAT(r.err, HasSubstr("unknown environment variable MATE_LOGLEVL"));
}

TEST(MateEnv, MarkdownCombinesWithNoOtherFlag) {
  auto r = mate_cmd({"env", "--markdown", "--check"}, {{"MATE_LOGLEVEL", "7"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("excludes"));
}

TEST(MateEnv, MarkdownIsIndependentOfTheEnvironment) {
  auto a = mate_cmd({"env", "--markdown"});
  auto b = mate_cmd({"env", "--markdown"}, {{"MATE_LOGLEVEL", "3"}});
  EXPECT_EQ(a.exit_code, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_THAT(a.out, HasSubstr("| `MATE_LOGLEVEL` | int | 0 | one of 0, 1, 3, 5, 10 | once |"));
}

TEST(MateEnv, CommittedReferenceDocIsCurrent) {
  std::ifstream f(MATE_SOURCE_DIR "/docs/reference/environment.md");
  ASSERT_TRUE(f) << "docs/reference/environment.md is missing";
  std::stringstream committed;
  committed << f.rdbuf();
  EXPECT_EQ(committed.str(), mate_cmd({"env", "--markdown"}).out)
      << "docs/reference/environment.md is stale: regenerate it with "
         "`build/default/bin/mate env --markdown > docs/reference/environment.md`";
}

TEST(Registry, LatchedVariablesAreReadOnceLiveOnesEveryTime) {
  auto r = run({LATCH_PROBE}, RunOptions{{{"MATE_LOGLEVEL", "3"}, {"MATE_JIT_VERBOSE", "0"}}, std::nullopt, std::nullopt});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("loglevel 3 -> 3"));
  EXPECT_THAT(r.out, HasSubstr("jit_verbose 0 -> 1"));
}

}  // namespace
