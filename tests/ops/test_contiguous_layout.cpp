// get_mk_alignment_for_contiguous_layout() and make_contiguous_layout().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mate/config.hpp"
#include "mate/ops/contiguous_layout.hpp"
#include "mate/ops/ops.hpp"

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;
using namespace mate::ops;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MkAlignment, DefaultsTo128AndFollowsTheVariable) {
  {
    ScopedOverride unset(Var::MATE_DEEPGEMM_MK_ALIGNMENT, std::nullopt);
    EXPECT_EQ(get_mk_alignment_for_contiguous_layout(), 128);
  }
  ScopedOverride align(Var::MATE_DEEPGEMM_MK_ALIGNMENT, "256");
  EXPECT_EQ(get_mk_alignment_for_contiguous_layout(), 256);
  EXPECT_EQ(make_contiguous_layout(std::vector<std::int64_t>{1}).m_sum, 256);
}

TEST(MkAlignment, AnInvalidValueNamesTheVariableAndTheAcceptedValues) {
  ScopedOverride align(Var::MATE_DEEPGEMM_MK_ALIGNMENT, "64");
  try {
    get_mk_alignment_for_contiguous_layout();
    FAIL() << "expected a ConfigError";
  } catch (const mate::config::ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("MATE_DEEPGEMM_MK_ALIGNMENT"));
    EXPECT_THAT(e.what(), HasSubstr("64"));
    EXPECT_THAT(e.what(), HasSubstr("128"));
    EXPECT_THAT(e.what(), HasSubstr("256"));
  }
}

TEST(ContiguousLayout, PadsEachGroupAndBuildsMIndices) {
  std::vector<std::int64_t> rows{3, 0, 5, 4};
  auto layout = make_contiguous_layout(rows, 4);
  EXPECT_EQ(layout.alignment, 4);
  EXPECT_EQ(layout.m_sum, 16);
  EXPECT_THAT(layout.group_offsets, ElementsAre(0, 4, 4, 12));
  EXPECT_THAT(layout.group_rows, ElementsAre(3, 0, 5, 4));
  EXPECT_THAT(layout.m_indices, ElementsAre(0, 0, 0, -1, 2, 2, 2, 2, 2, -1, -1, -1, 3, 3, 3, 3));
}

TEST(ContiguousLayout, UsesTheConfiguredAlignmentByDefault) {
  ScopedOverride unset(Var::MATE_DEEPGEMM_MK_ALIGNMENT, std::nullopt);
  auto layout = make_contiguous_layout(std::vector<std::int64_t>{129, 0, 128});
  EXPECT_EQ(layout.alignment, 128);
  EXPECT_EQ(layout.m_sum, 384);
  EXPECT_EQ(layout.m_indices[128], 0);
  EXPECT_EQ(layout.m_indices[129], -1);
  EXPECT_EQ(layout.m_indices[256], 2);
  EXPECT_TRUE(make_contiguous_layout(std::vector<std::int64_t>{}).m_indices.empty());
}

TEST(ContiguousLayout, RejectsNegativeRowsAndBadAlignments) {
  try {
    make_contiguous_layout(std::vector<std::int64_t>{4, -1}, 128);
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "mate::ops::make_contiguous_layout: group 1 has -1 rows (accepted: >= 0)");
  }
  try {
    make_contiguous_layout(std::vector<std::int64_t>{4}, 0);
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "mate::ops::make_contiguous_layout: alignment 0 is not positive (accepted: "
                           "get_mk_alignment_for_contiguous_layout(), 128 or 256)");
  }
}

}  // namespace
