// The table unwinder's walk (table_unwinder.hpp): each return address's frame rule found in a
// lock-free cache, or read from the unwind tables on a miss (unwind_rule.hpp), then applied to
// step to the caller's frame.
#include "guard/stack/table_unwinder.hpp"

#include <link.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

#include "guard/stack/elf_image.hpp"
#include "guard/stack/unwind_rule.hpp"

namespace mate::guard {

namespace {

// Counted on cache misses only: the walk with a warm cache writes no shared memory.
std::atomic<std::uint64_t> g_table_reads{0};
std::atomic<std::uint64_t> g_unsupported{0};

}  // namespace

#if defined(__x86_64__) && defined(__linux__)
namespace {

using unwind::Rule;

// ---- The rule cache ----

// One 64-bit word an entry, so entries never tear between threads: the return address in the low
// 47 bits (user-space addresses on x86-64), the rule in the high 17: bit 0 CFA from rbp, bits
// 1-12 the CFA offset in 8-byte units, bits 13-16 rbp's save slot in 8-byte units; a CFA offset
// of 0 marks the outermost frame (bit 0 clear) or an unsupported one (bit 0 set). Rules that do
// not fit (frames over 32 KiB) are not cached. 0 = empty.
constexpr unsigned kPcBits = 47;
constexpr std::uint64_t kPcMask = (std::uint64_t{1} << kPcBits) - 1;
constexpr std::size_t kCacheEntries = 2048;  // 16 KiB
constexpr std::size_t kWays = 4;              // a set is 32 bytes, in one cache line
alignas(64) std::atomic<std::uint64_t> g_cache[kCacheEntries];
std::atomic<unsigned> g_next_way{0};
// The loader's count of unloaded modules when the cache was last emptied: an unload can put other
// code at a cached address.
std::atomic<unsigned long long> g_unloads_seen{0};

std::size_t cache_set(std::uintptr_t pc) noexcept {
  std::uint64_t h = pc * 0x9e3779b97f4a7c15ull;
  return static_cast<std::size_t>(h >> 40) & (kCacheEntries - kWays);
}

bool cache_find(std::uintptr_t pc, Rule* rule) noexcept {
  const std::size_t set = cache_set(pc);
  for (std::size_t way = 0; way < kWays; ++way) {
    const std::uint64_t e = g_cache[set + way].load(std::memory_order_relaxed);
    if (e == 0 || (e & kPcMask) != pc) continue;
    const auto bits = static_cast<std::uint32_t>(e >> kPcBits);
    const std::uint32_t cfa_units = (bits >> 1) & 0xfff;
    if (cfa_units == 0) {
      rule->kind = (bits & 1) != 0 ? Rule::kUnsupported : Rule::kOutermost;
      return true;
    }
    rule->kind = Rule::kFrame;
    rule->cfa_from_rbp = (bits & 1) != 0;
    rule->cfa_offset = cfa_units * 8;
    rule->rbp_saved_at = ((bits >> 13) & 0xf) * 8;
    return true;
  }
  return false;
}

// Stores `rule` in one way of its set (an empty one, else the next in turn), when it fits.
void cache_put(std::uintptr_t pc, const Rule& rule) noexcept {
  if (pc == 0 || (pc & ~kPcMask) != 0) return;
  std::uint32_t bits = 0;
  if (rule.kind == Rule::kFrame) {
    if (rule.cfa_offset == 0 || rule.cfa_offset % 8 != 0 || rule.cfa_offset / 8 > 0xfff) return;
    if (rule.rbp_saved_at % 8 != 0 || rule.rbp_saved_at / 8 > 0xf) return;
    bits = (rule.cfa_from_rbp ? 1u : 0u) | (rule.cfa_offset / 8) << 1 | (rule.rbp_saved_at / 8) << 13;
  } else if (rule.kind == Rule::kUnsupported) {
    if (!rule.cacheable) return;
    bits = 1;  // remembered too: such a frame's walk goes to the C++ unwinder without reading again
  }
  const std::uint64_t entry = pc | std::uint64_t{bits} << kPcBits;
  const std::size_t set = cache_set(pc);
  std::size_t way = 0;
  while (way < kWays && g_cache[set + way].load(std::memory_order_relaxed) != 0) ++way;
  if (way == kWays) way = g_next_way.fetch_add(1, std::memory_order_relaxed) % kWays;
  // Only this entry is written: copying others around could bring back one a concurrent
  // clear_cache() had removed.
  g_cache[set + way].store(entry, std::memory_order_relaxed);
}

void clear_cache() noexcept {
  for (auto& e : g_cache) e.store(0, std::memory_order_relaxed);
}

}  // namespace
#endif

__attribute__((no_sanitize("address"))) TableWalk walk_with_unwind_tables(std::uintptr_t pc, std::uintptr_t sp,
                                                                        std::uintptr_t fp, void** frames, int max,
                                                                        int* n) noexcept {
  *n = 0;
#if defined(__x86_64__) && defined(__linux__)
  const int saved_errno = errno;
  // The loader's lock, once a walk (the C++ unwinder takes it too, or uses _dl_find_object).
  unsigned long long unloads = 0;
  dl_iterate_phdr(unwind::read_unloads, &unloads);
  if (unloads != g_unloads_seen.load(std::memory_order_acquire)) {
    // The entries first, then the count: a walk that sees the new count finds no entry the
    // unload made stale. (Flushes that race only clear twice.)
    clear_cache();
    g_unloads_seen.store(unloads, std::memory_order_release);
  }
  TableWalk result = TableWalk::kComplete;
  std::uint64_t read = 0;
  while (*n < max && pc != 0) {
    frames[(*n)++] = reinterpret_cast<void*>(pc);
    if (*n == max) break;
    Rule rule;
    if (!cache_find(pc, &rule)) {
      rule = unwind::read_rule(pc);
      ++read;
      // Still valid when stored, even across a concurrent flush: `pc` is on this thread's stack,
      // so its module cannot have been unloaded.
      cache_put(pc, rule);
    }
    if (rule.kind == Rule::kOutermost) break;
    if (rule.kind == Rule::kUnsupported) {
      result = TableWalk::kUnsupported;
      break;
    }
    const std::uintptr_t cfa = (rule.cfa_from_rbp ? fp : sp) + rule.cfa_offset;
    // Each caller's frame lies above its callee's, within a stack: anything else is a rule
    // that does not describe this stack.
    if (cfa <= sp || cfa - sp > (std::uintptr_t{1} << 30)) {
      result = TableWalk::kUnsupported;
      break;
    }
    if (rule.rbp_saved_at != 0) fp = *reinterpret_cast<const std::uintptr_t*>(cfa - rule.rbp_saved_at);
    pc = *reinterpret_cast<const std::uintptr_t*>(cfa - 8);
    sp = cfa;
  }
  if (read != 0) g_table_reads.fetch_add(read, std::memory_order_relaxed);
  if (result == TableWalk::kUnsupported) g_unsupported.fetch_add(1, std::memory_order_relaxed);
  errno = saved_errno;
  return result;
#else
  (void)pc, (void)sp, (void)fp, (void)frames, (void)max;
  g_unsupported.fetch_add(1, std::memory_order_relaxed);
  return TableWalk::kUnsupported;
#endif
}

TableUnwinderStats table_unwinder_stats() noexcept {
  return {g_table_reads.load(std::memory_order_relaxed), g_unsupported.load(std::memory_order_relaxed)};
}

void clear_table_unwinder_cache() noexcept {
#if defined(__x86_64__) && defined(__linux__)
  clear_cache();
#endif
}

}  // namespace mate::guard
