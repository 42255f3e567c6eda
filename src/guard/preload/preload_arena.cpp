// A size-class heap over one reserved region, for the guard's own allocations (see the header).
// Written by hand because it must not allocate through malloc itself, must answer "is this
// pointer mine?" with two compares on every free(), and only ever holds a few hundred blocks;
// an allocator library would bring back the start-up cost this file exists to avoid.
#include "guard/preload/preload_arena.hpp"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace mate::guard::preload {

namespace {

// Reserved address space; untouched pages cost nothing. Past it, the real allocator serves.
constexpr std::size_t kRegionBytes = std::size_t{64} << 20;
// Class c holds blocks of kMinBlock << c usable bytes: 16 B .. 256 KiB.
constexpr std::size_t kMinBlock = 16;
constexpr int kClasses = 15;
// Each block starts with this much room for its header, so the user pointer stays 16-aligned.
constexpr std::size_t kHeaderRoom = 16;
constexpr std::size_t kMaxAlignment = 4096;

// Stored in the 8 bytes just before the user pointer.
struct Header {
  std::uint32_t size_class;
  std::uint32_t shift;  // user pointer minus the block's first usable byte (over-aligned blocks)
};

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
std::atomic<std::uintptr_t> g_begin{0};
std::atomic<std::uintptr_t> g_end{0};
bool g_map_failed = false;       // under g_lock
std::uintptr_t g_bump = 0;       // under g_lock: next unused byte of the region
void* g_free[kClasses] = {};     // under g_lock: a free block's first word links to the next

Header* header_of(const void* user) noexcept {
  return reinterpret_cast<Header*>(reinterpret_cast<std::uintptr_t>(user) - sizeof(Header));
}

// Maps the region on first use (under g_lock); false when it cannot.
bool ensure_region() noexcept {
  if (g_begin.load(std::memory_order_relaxed) != 0) return true;
  if (g_map_failed) return false;
  void* p = mmap(nullptr, kRegionBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    g_map_failed = true;
    return false;
  }
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  g_bump = begin;
  // begin before end: a reader that sees the end sees the begin (arena_owns loads end first).
  g_begin.store(begin, std::memory_order_relaxed);
  g_end.store(begin + kRegionBytes, std::memory_order_release);
  return true;
}

// The first usable byte of a block of class c (taken from its free list or the bump pointer),
// 0 when the region is full.
std::uintptr_t take_block(int c) noexcept {
  if (g_free[c] != nullptr) {
    void* block = g_free[c];
    g_free[c] = *static_cast<void**>(block);
    return reinterpret_cast<std::uintptr_t>(block);
  }
  const std::size_t bytes = kHeaderRoom + (kMinBlock << c);
  if (g_end.load(std::memory_order_relaxed) - g_bump < bytes) return 0;
  const std::uintptr_t usable = g_bump + kHeaderRoom;
  g_bump += bytes;
  return usable;
}

}  // namespace

void* arena_allocate(std::size_t size, std::size_t alignment, bool zero) noexcept {
  if (alignment < kMinBlock) alignment = kMinBlock;
  if (alignment > kMaxAlignment || (alignment & (alignment - 1)) != 0) return nullptr;
  const std::size_t slack = alignment - kMinBlock;  // the most an aligned start can move
  if (size > (kMinBlock << (kClasses - 1)) - slack) return nullptr;
  int c = 0;
  while ((kMinBlock << c) < size + slack) ++c;

  pthread_mutex_lock(&g_lock);
  std::uintptr_t usable = ensure_region() ? take_block(c) : 0;
  pthread_mutex_unlock(&g_lock);
  if (usable == 0) return nullptr;

  const std::uintptr_t user = (usable + alignment - 1) & ~(alignment - 1);
  Header* h = header_of(reinterpret_cast<void*>(user));
  h->size_class = static_cast<std::uint32_t>(c);
  h->shift = static_cast<std::uint32_t>(user - usable);
  if (zero) std::memset(reinterpret_cast<void*>(user), 0, size);
  return reinterpret_cast<void*>(user);
}

bool arena_owns(const void* p) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t end = g_end.load(std::memory_order_acquire);
  return a < end && a >= g_begin.load(std::memory_order_relaxed);
}

void arena_free(void* p) noexcept {
  const Header h = *header_of(p);
  const auto user = reinterpret_cast<std::uintptr_t>(p);
  pthread_mutex_lock(&g_lock);
  // The header must describe a block inside what was handed out, and the block must not be
  // among the most recently freed of its class (a bounded look: frees stay O(1)).
  bool valid = h.size_class < kClasses && h.shift < kMaxAlignment && user % kMinBlock == 0 &&
               user - h.shift >= g_begin.load(std::memory_order_relaxed) + kHeaderRoom &&
               user - h.shift + (kMinBlock << h.size_class) <= g_bump;
  void* block = reinterpret_cast<void*>(user - h.shift);
  int looked = 0;
  for (void* f = valid ? g_free[h.size_class] : nullptr; f != nullptr && looked < 64;
       f = *static_cast<void**>(f), ++looked)
    if (f == block) valid = false;
  if (!valid) {
    pthread_mutex_unlock(&g_lock);
    static const char kMessage[] =
        "mate guard: invalid or double free of a block of the guard's own heap (preload_arena)\n";
    (void)!write(2, kMessage, sizeof kMessage - 1);
    std::abort();
  }
  *static_cast<void**>(block) = g_free[h.size_class];
  g_free[h.size_class] = block;
  pthread_mutex_unlock(&g_lock);
}

std::size_t arena_usable_size(const void* p) noexcept {
  const Header* h = header_of(p);
  return (kMinBlock << h->size_class) - h->shift;
}

void arena_prepare_fork() noexcept { pthread_mutex_lock(&g_lock); }
void arena_after_fork() noexcept { pthread_mutex_unlock(&g_lock); }

}  // namespace mate::guard::preload
