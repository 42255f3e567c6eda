// Entries, compressed stacks and buckets in MAP_NORESERVE mappings: only the pages holding
// stored stacks cost memory.
#include "guard/stack/stack_depot.hpp"

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

// The frame count, then each frame's signed distance from the one before (the first: from 0),
// zigzag-mapped so small distances either way take few bytes, as LEB128 varints. Equal stacks
// encode to equal bytes, so put() compares encodings.
std::size_t encode(void* const* frames, int count, unsigned char* out) noexcept {
  std::size_t n = 0;
  out[n++] = static_cast<unsigned char>(count);
  std::uint64_t previous = 0;
  for (int i = 0; i < count; ++i) {
    const std::uint64_t frame = reinterpret_cast<std::uintptr_t>(frames[i]);
    const std::uint64_t delta = frame - previous;  // modulo 2^64
    std::uint64_t zigzag = (delta << 1) ^ (0 - (delta >> 63));
    previous = frame;
    while (zigzag >= 0x80) {
      out[n++] = static_cast<unsigned char>(zigzag | 0x80);
      zigzag >>= 7;
    }
    out[n++] = static_cast<unsigned char>(zigzag);
  }
  return n;
}

int decode(const unsigned char* in, void** out) noexcept {
  const int count = in[0];
  std::size_t n = 1;
  std::uint64_t previous = 0;
  for (int i = 0; i < count; ++i) {
    std::uint64_t zigzag = 0;
    for (int shift = 0;; shift += 7) {
      const unsigned char byte = in[n++];
      zigzag |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) break;
    }
    const std::uint64_t delta = (zigzag >> 1) ^ (0 - (zigzag & 1));
    previous += delta;
    out[i] = reinterpret_cast<void*>(static_cast<std::uintptr_t>(previous));
  }
  return count;
}

}  // namespace

StackDepot::StackDepot(std::uint32_t capacity)
    : capacity_(capacity < kMaxCapacity ? capacity : kMaxCapacity),
      data_capacity_(std::size_t{capacity_} * kDataBytesPerStack + kMaxEncoded) {
  entries_ = static_cast<Entry*>(map_zeroed(std::size_t{capacity_} * sizeof(Entry)));
  try {
    data_ = static_cast<unsigned char*>(map_zeroed(data_capacity_));
  } catch (...) {
    munmap(entries_, std::size_t{capacity_} * sizeof(Entry));
    throw;
  }
  try {
    buckets_ = static_cast<std::uint32_t*>(map_zeroed(bucket_count_ * sizeof(std::uint32_t)));
  } catch (...) {
    munmap(entries_, std::size_t{capacity_} * sizeof(Entry));
    munmap(data_, data_capacity_);
    throw;
  }
}

StackDepot::~StackDepot() {
  munmap(entries_, std::size_t{capacity_} * sizeof(Entry));
  munmap(data_, data_capacity_);
  munmap(buckets_, bucket_count_ * sizeof(std::uint32_t));
}

std::size_t StackDepot::bytes_used() const noexcept {
  return std::size_t{used_.load(std::memory_order_relaxed)} * sizeof(Entry) + data_used_;
}

void StackDepot::grow_buckets() noexcept {
  const std::size_t bigger = bucket_count_ * 2;
  if (bigger > (std::size_t{1} << 24)) {  // the hash kept has 24 bits
    growth_failed_ = true;
    return;
  }
  void* p = mmap(nullptr, bigger * sizeof(std::uint32_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {  // longer chains, still correct
    growth_failed_ = true;
    return;
  }
  auto* fresh = static_cast<std::uint32_t*>(p);
  const std::uint32_t used = used_.load(std::memory_order_relaxed);
  for (std::uint32_t k = 1; k <= used; ++k) {
    Entry& e = entries_[k - 1];
    std::uint32_t& bucket = fresh[e.hash & (bigger - 1)];
    e.next = bucket;
    bucket = k;
  }
  munmap(buckets_, bucket_count_ * sizeof(std::uint32_t));
  buckets_ = fresh;
  bucket_count_ = bigger;
}

std::uint32_t StackDepot::put(void* const* frames, int count) noexcept {
  if (count <= 0) return 0;
  if (count > kMaxFrames) count = kMaxFrames;
  const std::uint32_t h = static_cast<std::uint32_t>(hash_frames(frames, count)) & 0xffffffu;
  unsigned char encoded[kMaxEncoded];
  const std::size_t length = encode(frames, count, encoded);
  if (!growth_failed_ && used_.load(std::memory_order_relaxed) >= 2 * bucket_count_) grow_buckets();
  std::uint32_t& bucket = buckets_[h & (bucket_count_ - 1)];
  for (std::uint32_t k = bucket; k != 0; k = entries_[k - 1].next) {
    const Entry& e = entries_[k - 1];
    if (e.hash == h && e.length == length && std::memcmp(data_ + e.data, encoded, length) == 0) return k;
  }
  const std::uint32_t used = used_.load(std::memory_order_relaxed);
  if (used >= capacity_ || data_used_ + length > data_capacity_) return 0;
  std::memcpy(data_ + data_used_, encoded, length);
  Entry& e = entries_[used];
  e.data = static_cast<std::uint32_t>(data_used_);
  e.hash = h;
  e.length = static_cast<std::uint32_t>(length);
  e.next = bucket;
  data_used_ += length;
  // Published after the stack is complete, so get() on any returned handle sees it whole.
  used_.store(used + 1, std::memory_order_release);
  bucket = used + 1;
  return used + 1;
}

int StackDepot::get(std::uint32_t handle, void** out) const noexcept {
  if (handle == 0 || handle > used_.load(std::memory_order_acquire)) return 0;
  return decode(data_ + entries_[handle - 1].data, out);
}

}  // namespace mate::guard
