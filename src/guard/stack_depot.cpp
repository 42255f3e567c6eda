// Records in a MAP_NORESERVE mapping: only the pages holding stored stacks cost memory.
#include "stack_depot.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "mate/guard/allocator.hpp"

namespace mate::guard {

namespace {

void* map_zeroed(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw GuardError("guard allocator: cannot map its backtrace depot (" + std::to_string(bytes) +
                     " bytes): " + std::strerror(errno));
  return p;
}

std::uint64_t hash_frames(void* const* frames, int count) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull ^ static_cast<std::uint64_t>(count);
  for (int i = 0; i < count; ++i) {
    h ^= reinterpret_cast<std::uintptr_t>(frames[i]);
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h;
}

}  // namespace

StackDepot::StackDepot(std::uint32_t capacity) : capacity_(capacity) {
  records_ = static_cast<Record*>(map_zeroed(std::size_t{capacity} * sizeof(Record)));
  try {
    buckets_ = static_cast<std::uint32_t*>(map_zeroed(bucket_count_ * sizeof(std::uint32_t)));
  } catch (...) {
    munmap(records_, std::size_t{capacity_} * sizeof(Record));
    throw;
  }
}

StackDepot::~StackDepot() {
  munmap(records_, std::size_t{capacity_} * sizeof(Record));
  munmap(buckets_, bucket_count_ * sizeof(std::uint32_t));
}

void StackDepot::grow_buckets() noexcept {
  const std::size_t bigger = bucket_count_ * 2;
  void* p = mmap(nullptr, bigger * sizeof(std::uint32_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {  // longer chains, still correct
    growth_failed_ = true;
    return;
  }
  auto* fresh = static_cast<std::uint32_t*>(p);
  const std::uint32_t used = used_.load(std::memory_order_relaxed);
  for (std::uint32_t k = 1; k <= used; ++k) {
    Record& r = records_[k - 1];
    std::uint32_t& bucket = fresh[r.hash & (bigger - 1)];
    r.next = bucket;
    bucket = k;
  }
  munmap(buckets_, bucket_count_ * sizeof(std::uint32_t));
  buckets_ = fresh;
  bucket_count_ = bigger;
}

std::uint32_t StackDepot::put(void* const* frames, int count) noexcept {
  if (count <= 0) return 0;
  if (count > kMaxFrames) count = kMaxFrames;
  const std::uint64_t h = hash_frames(frames, count);
  if (!growth_failed_ && used_.load(std::memory_order_relaxed) >= 2 * bucket_count_) grow_buckets();
  std::uint32_t& bucket = buckets_[h & (bucket_count_ - 1)];
  for (std::uint32_t k = bucket; k != 0; k = records_[k - 1].next) {
    const Record& r = records_[k - 1];
    if (r.hash == h && r.count == static_cast<std::uint32_t>(count) &&
        std::memcmp(r.frames, frames, sizeof(void*) * static_cast<std::size_t>(count)) == 0)
      return k;
  }
  const std::uint32_t used = used_.load(std::memory_order_relaxed);
  if (used >= capacity_) return 0;
  Record& r = records_[used];
  r.hash = h;
  r.count = static_cast<std::uint32_t>(count);
  std::memcpy(r.frames, frames, sizeof(void*) * static_cast<std::size_t>(count));
  r.next = bucket;
  // Published after the record is complete, so get() on any returned handle sees it whole.
  used_.store(used + 1, std::memory_order_release);
  bucket = used + 1;
  return used + 1;
}

int StackDepot::get(std::uint32_t handle, void** out) const noexcept {
  if (handle == 0 || handle > used_.load(std::memory_order_acquire)) return 0;
  const Record& r = records_[handle - 1];
  for (std::uint32_t i = 0; i < r.count; ++i) out[i] = r.frames[i];
  return static_cast<int>(r.count);
}

}  // namespace mate::guard
