// Deduplicated backtraces: each distinct stack is stored once and named by a 32-bit handle, so a
// tracked allocation carries two handles instead of two frame arrays (the quarantine keeps
// thousands of records; most share a handful of call sites), as gwp_asan and ASan do.
//
// Contract: put() is called under the owning SlotTable's mutex (it takes no lock of its own and
// never calls malloc: records live in an mmap'd array of fixed capacity). get() is lock-free and
// async-signal-safe: a record is written once, before its handle is published, and never moves.
// Handle 0 means "no backtrace" (capture off, or the depot is full).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mate::guard {

inline constexpr int kMaxFrames = 16;

class StackDepot {
 public:
  // Throws GuardError when the depot cannot be mapped.
  explicit StackDepot(std::uint32_t capacity);
  ~StackDepot();
  StackDepot(const StackDepot&) = delete;
  StackDepot& operator=(const StackDepot&) = delete;

  // The handle of `frames` (stored on first sight); 0 when count is 0 or the depot is full.
  std::uint32_t put(void* const* frames, int count) noexcept;
  // Copies the frames of `handle` into `out` (kMaxFrames entries); returns how many.
  int get(std::uint32_t handle, void** out) const noexcept;
  std::uint32_t size() const noexcept { return used_.load(std::memory_order_relaxed); }

 private:
  struct Record {
    std::uint64_t hash;
    std::uint32_t next;  // chain in the bucket, handle (0 = end); only put() reads it
    std::uint32_t count;
    void* frames[kMaxFrames];
  };
  // The bucket array starts at one page and doubles (relinking the chains) when there are two
  // stacks a bucket: a program with a handful of call sites touches one page, not 256 KiB.
  static constexpr std::size_t kFirstBuckets = 1024;
  void grow_buckets() noexcept;

  std::uint32_t capacity_;
  std::atomic<std::uint32_t> used_{0};
  Record* records_;           // handle h lives at records_[h - 1]
  std::uint32_t* buckets_;    // first handle of each chain
  std::size_t bucket_count_ = kFirstBuckets;  // a power of two
  bool growth_failed_ = false;  // no mmap retry on every put() once the system said no
};

}  // namespace mate::guard
