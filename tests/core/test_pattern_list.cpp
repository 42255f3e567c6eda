#include <gtest/gtest.h>

#include "mate/core/pattern_list.hpp"

namespace {

using mate::core::PatternList;

TEST(PatternList, ParsesCommaSeparatedAndMatchesFnmatch) {
  PatternList p = PatternList::parse(" gemm* , Attention.?un,,");
  ASSERT_EQ(p.patterns().size(), 2u);
  EXPECT_TRUE(p.matches("gemm_fp8"));
  EXPECT_TRUE(p.matches("Attention.run"));
  EXPECT_FALSE(p.matches("attention.run"));
  EXPECT_FALSE(PatternList().matches("anything"));
}

TEST(PatternList, IncludeThenExclude) {
  PatternList inc = PatternList::parse("Gemm.*");
  PatternList exc = PatternList::parse("*.plan");
  EXPECT_TRUE(mate::core::selected("Gemm.run", inc, exc));
  EXPECT_FALSE(mate::core::selected("Gemm.plan", inc, exc));
  EXPECT_FALSE(mate::core::selected("rmsnorm", inc, exc));
  EXPECT_TRUE(mate::core::selected("rmsnorm", PatternList(), exc));
}

}  // namespace
