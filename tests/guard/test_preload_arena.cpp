// The preload library's own heap (src/guard/preload_arena.hpp): the blocks it hands the guard's
// bookkeeping are aligned, distinct, reused after free, zeroed for calloc, recognised by
// address, and it declines what it cannot serve so the caller falls back to the real allocator.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "guard/preload/preload_arena.hpp"

namespace {

namespace arena = mate::guard::preload;

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(PreloadArena, BlocksAreAlignedDistinctAndOwned) {
  std::vector<void*> blocks;
  std::set<std::uintptr_t> seen;
  for (std::size_t size : {1, 15, 16, 17, 100, 4096, 70000}) {
    void* p = arena::arena_allocate(size, 0, false);
    ASSERT_NE(p, nullptr) << size;
    EXPECT_EQ(address(p) % 16, 0u);
    EXPECT_TRUE(arena::arena_owns(p));
    EXPECT_GE(arena::arena_usable_size(p), size);
    std::memset(p, 0xab, size);  // the whole requested size is writable
    EXPECT_TRUE(seen.insert(address(p)).second);
    blocks.push_back(p);
  }
  int on_stack = 0;
  EXPECT_FALSE(arena::arena_owns(&on_stack));
  EXPECT_FALSE(arena::arena_owns(nullptr));
  for (void* p : blocks) arena::arena_free(p);
}

TEST(PreloadArena, FreedBlocksAreReusedAndCallocZeroes) {
  void* a = arena::arena_allocate(200, 0, false);
  ASSERT_NE(a, nullptr);
  std::memset(a, 0xff, 200);
  arena::arena_free(a);
  void* b = arena::arena_allocate(200, 0, true);
  EXPECT_EQ(b, a);  // same size class, LIFO free list
  const auto* bytes = static_cast<const unsigned char*>(b);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
  arena::arena_free(b);
}

TEST(PreloadArena, HonoursAlignmentUpToAPage) {
  for (std::size_t alignment : {32, 64, 256, 4096}) {
    void* p = arena::arena_allocate(100, alignment, false);
    ASSERT_NE(p, nullptr) << alignment;
    EXPECT_EQ(address(p) % alignment, 0u) << alignment;
    EXPECT_GE(arena::arena_usable_size(p), 100u);
    arena::arena_free(p);
  }
  EXPECT_EQ(arena::arena_allocate(100, 8192, false), nullptr);  // past a page: the real allocator
  EXPECT_EQ(arena::arena_allocate(100, 48, false), nullptr);    // not a power of two
}

TEST(PreloadArena, DeclinesWhatItCannotServe) {
  EXPECT_EQ(arena::arena_allocate(std::size_t{1} << 20, 0, false), nullptr);
  EXPECT_EQ(arena::arena_allocate(SIZE_MAX, 0, false), nullptr);
  void* largest = arena::arena_allocate(256 << 10, 0, false);  // the largest class
  EXPECT_NE(largest, nullptr);
  arena::arena_free(largest);
}

TEST(PreloadArena, AnOverAlignedBlockIsReusedForAPlainOne) {
  void* aligned = arena::arena_allocate(100, 1024, false);
  ASSERT_NE(aligned, nullptr);
  const std::size_t usable = arena::arena_usable_size(aligned);
  arena::arena_free(aligned);
  // The same class, handed out again from the block's first usable byte.
  void* plain = arena::arena_allocate(usable, 0, false);
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(arena::arena_owns(plain));
  EXPECT_GE(arena::arena_usable_size(plain), usable);
  std::memset(plain, 0x5a, usable);
  arena::arena_free(plain);
}

TEST(PreloadArenaDeathTest, InvalidAndDoubleFreesEndTheProcess) {
  EXPECT_DEATH(
      {
        void* p = arena::arena_allocate(64, 0, false);
        arena::arena_free(p);
        arena::arena_free(p);
      },
      "invalid or double free");
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(arena::arena_allocate(256, 0, false));
        std::memset(p, 0x7f, 256);
        arena::arena_free(p + 64);  // not a block start: its "header" is user bytes
      },
      "invalid or double free");
}

TEST(PreloadArena, ThreadsAllocatingAndFreeingAtOnce) {
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      std::vector<unsigned char*> mine;
      for (int i = 0; i < 2000; ++i) {
        std::size_t size = 16 + static_cast<std::size_t>((i * 37 + t) % 900);
        auto* p = static_cast<unsigned char*>(arena::arena_allocate(size, 0, false));
        if (p == nullptr) {
          ++failures[t];
          continue;
        }
        std::memset(p, t + 1, size);
        mine.push_back(p);
        if (i % 3 == 0) {
          // Another thread's writes never land in this block.
          unsigned char* q = mine.front();
          if (q[0] != t + 1) ++failures[t];
          arena::arena_free(q);
          mine.erase(mine.begin());
        }
      }
      for (unsigned char* p : mine) {
        if (p[0] != t + 1) ++failures[t];
        arena::arena_free(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

}  // namespace
