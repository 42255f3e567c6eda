// Deduplicated backtraces: each distinct stack is stored once and named by a 32-bit handle, so a
// tracked allocation carries two handles instead of two frame arrays (the quarantine keeps
// thousands of records; most share a handful of call sites), as gwp_asan and ASan do.
//
// Stacks are stored compressed: each frame as the zigzag varint of its distance from the frame
// before (return addresses of one stack mostly lie in one library, a few MiB apart), ~4 bytes a
// frame instead of 8. Programs with deep, varied call paths (a compiler, an interpreter) store
// tens of thousands of distinct stacks: g++ compiling one file under `mate guard-run` stored
// ~50,000, 7.4 MiB as fixed 144-byte records (bench/README.md "guard").
//
// Contract: put() is called under the owning SlotTable's mutex (it takes no lock of its own and
// never calls malloc: everything lives in mmap'd memory). get() is lock-free and
// async-signal-safe: a stack's bytes and entry are written once, before its handle is published,
// and never move. Handle 0 means "no backtrace" (capture off, or the depot is full).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mate::guard {

inline constexpr int kMaxFrames = 16;

class StackDepot {
 public:
  // Quarantine records keep a handle in 20 bits.
  static constexpr std::uint32_t kMaxCapacity = (1u << 20) - 1;
  // Room for `capacity` stacks (at most kMaxCapacity). Throws GuardError when the depot cannot
  // be mapped.
  explicit StackDepot(std::uint32_t capacity);
  ~StackDepot();
  StackDepot(const StackDepot&) = delete;
  StackDepot& operator=(const StackDepot&) = delete;

  // The handle of `frames` (stored on first sight); 0 when count is 0 or the depot is full.
  std::uint32_t put(void* const* frames, int count) noexcept;
  // Copies the frames of `handle` into `out` (kMaxFrames entries); returns how many.
  int get(std::uint32_t handle, void** out) const noexcept;
  std::uint32_t size() const noexcept { return used_.load(std::memory_order_relaxed); }
  // Bytes the stored stacks take (entries and compressed frames, not the bucket array).
  std::size_t bytes_used() const noexcept;

 private:
  // One per stored stack; its frames are `bytes[0]` (the frame count) then the varints.
  struct Entry {
    std::uint32_t next;  // chain in the bucket, handle (0 = end); only put() reads it
    std::uint32_t data;  // offset of its bytes in data_
    std::uint32_t hash : 24;   // of the frames (the low bits pick the bucket)
    std::uint32_t length : 8;  // of its bytes
  };
  // The largest encoding of one stack: the count, then 10 bytes per 64-bit varint.
  static constexpr std::size_t kMaxEncoded = 1 + 10 * kMaxFrames;
  static_assert(kMaxEncoded < 256, "a stack's length is kept in 8 bits");
  // Room for the compressed stacks: 96 bytes a stack on average (a 16-frame stack within one
  // library takes ~60); the address space is reserved, not used, but strict overcommit counts it.
  static constexpr std::size_t kDataBytesPerStack = 96;
  // The bucket array starts at one page and doubles (relinking the chains) when there are two
  // stacks a bucket, up to 2^24 buckets (the hash kept): a program with a handful of call sites
  // touches one page, not megabytes.
  static constexpr std::size_t kFirstBuckets = 1024;
  void grow_buckets() noexcept;

  std::uint32_t capacity_;
  std::atomic<std::uint32_t> used_{0};
  Entry* entries_;            // handle h lives at entries_[h - 1]
  unsigned char* data_;       // compressed stacks, appended
  std::size_t data_used_ = 0;
  std::size_t data_capacity_;
  std::uint32_t* buckets_;    // first handle of each chain
  std::size_t bucket_count_ = kFirstBuckets;  // a power of two
  bool growth_failed_ = false;  // no mmap retry on every put() once the system said no
};

}  // namespace mate::guard
