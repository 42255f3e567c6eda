// The environment of helper programs: the guard taken out, everything else kept.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mate/core/child_environment.hpp"

namespace {

std::vector<std::string> unguarded(std::vector<std::string> entries) {
  std::vector<char*> base;
  for (auto& e : entries) base.push_back(e.data());
  base.push_back(nullptr);
  return mate::core::unguarded_environment(base.data());
}

using Env = std::vector<std::string>;

TEST(UnguardedEnvironment, TakesOutThePreloadAndTheBootstrapVariablesOnly) {
  EXPECT_EQ(unguarded({"PATH=/usr/bin", "LD_PRELOAD=/opt/mate/lib/libmate_guard_preload.so",
                       "MATE_GUARD_ALLOCATOR_AUTO_INSTALL=1", "MATE_GUARD_ALLOCATOR_MODE=head",
                       "MATE_GUARD_BACKTRACES=0", "MATE_LOGLEVEL=3", "CCACHE_DIR=/c"}),
            (Env{"PATH=/usr/bin", "MATE_GUARD_BACKTRACES=0", "MATE_LOGLEVEL=3", "CCACHE_DIR=/c"}));
}

TEST(UnguardedEnvironment, KeepsTheUsersOwnPreloadsInOrder) {
  EXPECT_EQ(unguarded({"LD_PRELOAD=/b/libmate_guard_preload.so:libfoo.so /x/libbar.so"}),
            (Env{"LD_PRELOAD=libfoo.so:/x/libbar.so"}));
  EXPECT_EQ(unguarded({"LD_PRELOAD=libfoo.so::/b/libmate_guard_preload.so"}), (Env{"LD_PRELOAD=libfoo.so"}));
  EXPECT_EQ(unguarded({"LD_PRELOAD=libfoo.so"}), (Env{"LD_PRELOAD=libfoo.so"}));
  // Only the file name counts: a folder named like the preload is someone else's library.
  EXPECT_EQ(unguarded({"LD_PRELOAD=/x/libmate_guard_preload_build/libfoo.so:libmate_guard_preload.so"}),
            (Env{"LD_PRELOAD=/x/libmate_guard_preload_build/libfoo.so"}));
  EXPECT_EQ(unguarded({"LD_PRELOAD="}), Env{});
  EXPECT_EQ(unguarded({}), Env{});
}

}  // namespace
