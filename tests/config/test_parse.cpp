// Strict parsing: what each type accepts, and what the error says when it does not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mate/config.hpp"

namespace mate::config {
namespace {

using ::testing::HasSubstr;

std::string error_of(Var v, std::string_view text) {
  try {
    parse(v, text);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.variable(), info(v).name);
    return e.what();
  }
  ADD_FAILURE() << "'" << text << "' was accepted for " << info(v).name;
  return "";
}

TEST(ParseBool, AcceptsEveryDocumentedSpellingInAnyCaseAndTrimmed) {
  for (const char* t : {"1", "true", "TRUE", "True", "yes", "YES", "on", "On", "  1 ", "\ttrue\n"})
    EXPECT_TRUE(parse(Var::MATE_DISABLE_JIT, t).boolean) << t;
  for (const char* t : {"0", "false", "FALSE", "no", "No", "off", "OFF", " 0 "})
    EXPECT_FALSE(parse(Var::MATE_DISABLE_JIT, t).boolean) << t;
}

TEST(ParseBool, RejectsAnythingElseNamingVariableValueAndAccepted) {
  for (const char* t : {"2", "y", "enable", "truee", "1 1", "-1"}) {
    std::string msg = error_of(Var::MATE_DISABLE_JIT, t);
    EXPECT_THAT(msg, HasSubstr("MATE_DISABLE_JIT"));
    EXPECT_THAT(msg, HasSubstr(std::string("'") + t + "'"));
    EXPECT_THAT(msg, HasSubstr("true/false"));
    EXPECT_THAT(msg, HasSubstr("mate env"));
  }
}

TEST(ParseEmpty, CountsAsUnsetAndGivesTheDefault) {
  EXPECT_EQ(parse(Var::MATE_LOGLEVEL, "").integer, 0);
  EXPECT_EQ(parse(Var::MATE_LOGLEVEL, "   ").integer, 0);
  EXPECT_EQ(parse(Var::MATE_DEEPGEMM_MK_ALIGNMENT, "").integer, 128);
  EXPECT_EQ(parse(Var::MATE_DUMP_DIR, "").text, "mate_dumps");
  EXPECT_TRUE(parse(Var::MATE_MCC, "").text.empty());
}

TEST(ParseInt, LogLevelOnlyDocumentedLevels) {
  for (int level : {0, 1, 3, 5, 10}) EXPECT_EQ(parse(Var::MATE_LOGLEVEL, std::to_string(level)).integer, level);
  for (const char* t : {"2", "4", "6", "11", "-1"}) {
    std::string msg = error_of(Var::MATE_LOGLEVEL, t);
    EXPECT_THAT(msg, HasSubstr("one of 0, 1, 3, 5, 10"));
  }
}

TEST(ParseInt, MustBeConsumedWhole) {
  for (const char* t : {"3abc", "3.0", "0x3", "three", "+3", "3 5", "1e1"})
    EXPECT_THAT(error_of(Var::MATE_LOGLEVEL, t), HasSubstr("not an integer")) << t;
}

TEST(ParseInt, DeepGemmAlignmentOnly128Or256) {
  EXPECT_EQ(parse(Var::MATE_DEEPGEMM_MK_ALIGNMENT, "256").integer, 256);
  EXPECT_THAT(error_of(Var::MATE_DEEPGEMM_MK_ALIGNMENT, "64"), HasSubstr("one of 128, 256"));
}

TEST(ParseInt, RangesAreChecked) {
  EXPECT_EQ(parse(Var::MATE_PYTEST_SHARD_TOTAL, "4").integer, 4);
  EXPECT_THAT(error_of(Var::MATE_PYTEST_SHARD_TOTAL, "0"), HasSubstr("an integer from 1 to 9223372036854775807"));
  EXPECT_THAT(error_of(Var::MATE_DUMP_MAX_COUNT, "-5"), HasSubstr("out of range"));
  EXPECT_THAT(error_of(Var::MAX_JOBS, "0"), HasSubstr("from 1 to"));
}

TEST(ParseFloat, WholeFiniteAndInRange) {
  EXPECT_DOUBLE_EQ(parse(Var::MATE_DUMP_MAX_SIZE_GB, "0.5").real, 0.5);
  EXPECT_DOUBLE_EQ(parse(Var::MATE_DUMP_MAX_SIZE_GB, "20").real, 20.0);
  EXPECT_THAT(error_of(Var::MATE_DUMP_MAX_SIZE_GB, "1.5GB"), HasSubstr("not a number"));
  EXPECT_THAT(error_of(Var::MATE_DUMP_MAX_SIZE_GB, "inf"), HasSubstr("finite"));
  EXPECT_THAT(error_of(Var::MATE_DUMP_MAX_SIZE_GB, "nan"), HasSubstr("finite"));
  EXPECT_THAT(error_of(Var::MATE_DUMP_MAX_SIZE_GB, "-1"), HasSubstr("out of range"));
}

TEST(ParseEnum, ModesAndShardMode) {
  EXPECT_EQ(parse(Var::MATE_GUARD_ALLOCATOR_MODE, "head").text, "head");
  EXPECT_EQ(parse(Var::MATE_PYTEST_GUARD_MODE, " TAIL ").text, "tail");
  EXPECT_THAT(error_of(Var::MATE_GUARD_ALLOCATOR_MODE, "both"), HasSubstr("one of tail, head"));
  EXPECT_EQ(parse(Var::MATE_PYTEST_SHARD_MODE, "file").text, "file");
  EXPECT_THAT(error_of(Var::MATE_PYTEST_SHARD_MODE, "test"), HasSubstr("one of file"));
}

TEST(ParsePatternList, CommaSeparatedTrimmedEmptyItemsDropped) {
  EXPECT_EQ(parse(Var::MATE_DUMP_INCLUDE, "gemm*, *attention* ,,rms_norm").list,
            (std::vector<std::string>{"gemm*", "*attention*", "rms_norm"}));
  EXPECT_TRUE(parse(Var::MATE_DUMP_EXCLUDE, "").list.empty());
}

TEST(ParseArchList, SpaceSeparatedMajorMinor) {
  EXPECT_EQ(parse(Var::MATE_MUSA_ARCH_LIST, "3.1 4.0").list, (std::vector<std::string>{"3.1", "4.0"}));
  EXPECT_EQ(parse(Var::MATE_CUDA_ARCH_LIST, " 9.0   10.0 ").list, (std::vector<std::string>{"9.0", "10.0"}));
  EXPECT_EQ(parse(Var::MATE_CUDA_ARCH_LIST, "12.0 7.5 09.0").list, (std::vector<std::string>{"12.0", "7.5", "09.0"}));
  // What no compiler names: a zero or three-digit major, a two-digit minor, numbers past 64 bits.
  for (const char* t : {"sm_90", "9", "9.", ".0", "9.0,10.0", "9.0a", "0.0", "100.0", "9.10",
                        "99999999999999999999.0", "9.99999999999999999999"}) {
    std::string msg = error_of(Var::MATE_CUDA_ARCH_LIST, t);
    EXPECT_THAT(msg, HasSubstr("major.minor")) << t;
  }
}

TEST(AcceptedValues, DescribesEachType) {
  EXPECT_EQ(accepted_values(Var::MATE_LOGLEVEL), "one of 0, 1, 3, 5, 10");
  EXPECT_EQ(accepted_values(Var::MATE_DUMP_MAX_COUNT), "an integer from 0 to 9223372036854775807");
  EXPECT_EQ(accepted_values(Var::MATE_GUARD_ALLOCATOR_MODE), "one of tail, head");
  EXPECT_THAT(accepted_values(Var::MATE_DISABLE_JIT), HasSubstr("yes/no"));
}

// parse_scalar (the guard preload's allocation-free reader) follows exactly parse()'s rules for
// every Bool, Int and Enum variable.
TEST(ParseScalar, AgreesWithParseOnEveryScalarVariable) {
  const char* corpus[] = {"", "  ", "0", "1", " 1 ", "2", "3", "5", "10", "11", "-1", "-5", "+3", "0x3",
                          "128", "256", "64", "4", "1e1", "3abc", "9223372036854775807",
                          "9223372036854775808", "true", "TRUE", "no", "Off", "yes ", "y", "tail", "HEAD",
                          " head ", "both", "text", "JSON", "auto", "cuda", "file", "test"};
  int scalars = 0;
  for (const VarInfo& v : all_variables()) {
    if (v.type != Type::Bool && v.type != Type::Int && v.type != Type::Enum) {
      EXPECT_FALSE(parse_scalar(v.id, "1").ok) << v.name;
      continue;
    }
    ++scalars;
    for (const char* text : corpus) {
      const Scalar got = parse_scalar(v.id, text);
      std::optional<Value> want;
      try {
        want = parse(v.id, text);
      } catch (const ConfigError&) {
      }
      ASSERT_EQ(got.ok, want.has_value()) << v.name << "='" << text << "'";
      if (!want) continue;
      const bool blank = std::string_view(text).find_first_not_of(" \t\n") == std::string_view::npos;
      const bool blank_without_default = blank && v.default_value.empty();
      EXPECT_EQ(got.set, !blank_without_default) << v.name << "='" << text << "'";
      if (v.type == Type::Bool) {
        EXPECT_EQ(got.boolean, want->boolean) << v.name << "='" << text << "'";
      } else if (v.type == Type::Int) {
        EXPECT_EQ(got.integer, want->integer) << v.name << "='" << text << "'";
      } else {
        EXPECT_EQ(std::string(got.choice), want->text) << v.name << "='" << text << "'";
      }
    }
  }
  EXPECT_GT(scalars, 10);
}

}  // namespace
}  // namespace mate::config
