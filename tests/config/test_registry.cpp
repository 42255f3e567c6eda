// Lookup order, latching, overrides and did-you-mean suggestions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mate/config.hpp"

namespace mate::config {
namespace {

TEST(ScopedOverride, ReplacesTheValueAndRestoresItAfterwards) {
  EXPECT_EQ(loglevel(), 0);
  {
    ScopedOverride o(Var::MATE_LOGLEVEL, "3");
    EXPECT_EQ(loglevel(), 3);
    EXPECT_EQ(source(Var::MATE_LOGLEVEL), Source::Override);
    {
      ScopedOverride inner(Var::MATE_LOGLEVEL, "5");
      EXPECT_EQ(loglevel(), 5);
    }
    EXPECT_EQ(loglevel(), 3);
  }
  EXPECT_EQ(loglevel(), 0);
  EXPECT_EQ(source(Var::MATE_LOGLEVEL), Source::Default);
}

TEST(ScopedOverride, NulloptAndEmptyReadAsUnset) {
  ScopedOverride o(Var::MATE_DEEPGEMM_MK_ALIGNMENT, std::nullopt);
  EXPECT_FALSE(is_set(Var::MATE_DEEPGEMM_MK_ALIGNMENT));
  EXPECT_EQ(deepgemm_mk_alignment(), 128);
  ScopedOverride empty(Var::MATE_DEEPGEMM_MK_ALIGNMENT, "  ");
  EXPECT_FALSE(is_set(Var::MATE_DEEPGEMM_MK_ALIGNMENT));
  EXPECT_EQ(deepgemm_mk_alignment(), 128);
}

TEST(TypedGetters, InvalidValueThrowsConfigErrorNamingVariableAndValue) {
  ScopedOverride o(Var::MATE_LOGLEVEL, "4");
  try {
    (void)loglevel();
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.variable(), "MATE_LOGLEVEL");
    EXPECT_EQ(e.value(), "4");
    EXPECT_THAT(e.what(), ::testing::HasSubstr("one of 0, 1, 3, 5, 10"));
  }
}

TEST(TypedGetters, ReturnTheirTypes) {
  ScopedOverride a(Var::MATE_DUMP_INCLUDE, "a*,b");
  ScopedOverride b(Var::MATE_DUMP_SAFETENSORS, "yes");
  ScopedOverride c(Var::MATE_DUMP_MAX_SIZE_GB, "1.25");
  ScopedOverride d(Var::MATE_GUARD_ALLOCATOR_MODE, "head");
  EXPECT_EQ(dump_include(), (std::vector<std::string>{"a*", "b"}));
  EXPECT_TRUE(dump_safetensors());
  EXPECT_DOUBLE_EQ(dump_max_size_gb(), 1.25);
  EXPECT_EQ(guard_allocator_mode(), "head");
}

TEST(UnsetWithoutDefault, IsDistinguishableFromSet) {
  ScopedOverride o(Var::MATE_GUARD_ALLOCATOR_SYNC_ON_FREE, std::nullopt);
  EXPECT_FALSE(is_set(Var::MATE_GUARD_ALLOCATOR_SYNC_ON_FREE));
  ScopedOverride p(Var::MATE_GUARD_ALLOCATOR_SYNC_ON_FREE, "off");
  EXPECT_TRUE(is_set(Var::MATE_GUARD_ALLOCATOR_SYNC_ON_FREE));
  EXPECT_FALSE(guard_allocator_sync_on_free());
}

TEST(Registry, FindAndNames) {
  ASSERT_NE(find("MATE_LOGLEVEL"), nullptr);
  EXPECT_EQ(find("MATE_LOGLEVEL")->id, Var::MATE_LOGLEVEL);
  EXPECT_EQ(find("MATE_LOGLEVL"), nullptr);
  EXPECT_EQ(info(Var::MATE_JIT_VERBOSE).policy, Policy::Live);
  EXPECT_EQ(info(Var::MATE_LOGLEVEL).policy, Policy::Latched);
}

TEST(EditDistance, Basics) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("MATE_LOGLEVL", "MATE_LOGLEVEL"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(SuggestVariable, SlipsWordOrderAndLeftOutWords) {
  EXPECT_EQ(suggest_variable("MATE_LOGLEVL"), "MATE_LOGLEVEL");
  EXPECT_EQ(suggest_variable("MATE_DISABLE_JTI"), "MATE_DISABLE_JIT");
  EXPECT_EQ(suggest_variable("MATE_JIT_DISABLE"), "MATE_DISABLE_JIT");
  EXPECT_EQ(suggest_variable("MATE_MUSA_ARCH"), "MATE_MUSA_ARCH_LIST");
  EXPECT_EQ(suggest_variable("MATE_CUDA_ARCHS"), "MATE_CUDA_ARCH_LIST");
  EXPECT_EQ(suggest_variable("MATE_WORKSPACE"), "MATE_WORKSPACE_BASE");
  EXPECT_EQ(suggest_variable("MATE_MAX_JOBS"), "MAX_JOBS");
  EXPECT_EQ(suggest_variable("MATE_GUARD_MODE"), "MATE_GUARD_ALLOCATOR_MODE");
  EXPECT_EQ(suggest_variable("MATE_PYTEST_GUARD"), "MATE_PYTEST_GUARD_ALLOC");
  EXPECT_EQ(suggest_variable("MATE_DUMP_MAX_SIZE"), "MATE_DUMP_MAX_SIZE_GB");
  // A public variable before an internal one that matches as well.
  ASSERT_NE(find(suggest_variable("MATE_LOG")), nullptr);
  EXPECT_EQ(find(suggest_variable("MATE_LOG"))->category, Category::Public);
  // Nothing plausible: no suggestion rather than a wrong one.
  EXPECT_EQ(suggest_variable("MATE_FOO"), "");
  EXPECT_EQ(suggest_variable("MATE_"), "");
  EXPECT_EQ(suggest_variable("MATE_COLOR"), "");
}

TEST(ShardIndexError, NamesBothVariablesAndTheAcceptedIndices) {
  EXPECT_EQ(shard_index_error(0, 1), "");
  EXPECT_EQ(shard_index_error(2, 3), "");
  EXPECT_EQ(shard_index_error(3, 3), "MATE_PYTEST_SHARD_INDEX=3 is not below MATE_PYTEST_SHARD_TOTAL=3; accepted: 0 to 2");
}

}  // namespace
}  // namespace mate::config
