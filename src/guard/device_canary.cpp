// Writing a device allocation's canary: by copies within the device from an image of the
// pattern kept in device memory, or staged through the host buffer `scratch`. Kept apart from
// allocator.cpp so that the preload places it with the code a host-only program never runs
// (src/guard/preload/preload_layout.ld).
#include <algorithm>
#include <mutex>

#include "guard/allocator_reports.hpp"
#include "guard/canary.hpp"
#include "guard/slot_table.hpp"
#include "mate/guard/allocator.hpp"

namespace mate::guard {

namespace {

// Writes device canary over [begin, begin + bytes) by copies within the device from `image`,
// nothing through the host; its error is returned as is (the caller stages the side instead).
device::Status copy_canary_from_image(device::Backend& backend, std::uintptr_t begin, std::size_t bytes,
                                      const PatternImage& image) noexcept {
  const std::size_t most = image.bytes - kPatternBytes;  // from any offset within one period
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(most, bytes - done);
    const std::uintptr_t a = begin + done;
    device::Status s = backend.copy_within(a, image.base + (a & (kPatternBytes - 1)), n);
    if (!s.ok()) return s;
    done += n;
  }
  return device::Status::success();
}

}  // namespace

// The device copy of the canary pattern (under scratch_mutex), made on first use: one granule
// plus one pattern period (rounded to granules), so that any canary, which is always shorter
// than a granule, is one device-side copy; filled through the staging buffer once. nullptr while
// it cannot be made (no device-side copy, the mapping refused): canaries are then staged through
// the host. A failure may be passing (device memory full for a moment), so it is tried again
// at the next allocations, a few times in all.
const PatternImage* GuardAllocator::pattern_image_locked() noexcept {
  constexpr int kAttempts = 3;
  if (table_->pattern_image.bytes == 0 && table_->pattern_image_attempts < kAttempts) {
    table_->pattern_image_attempts += 1;
    const std::size_t g = backend_.granularity();
    const std::size_t bytes = (g + kPatternBytes + g - 1) / g * g;
    std::uintptr_t base = 0;
    if (!backend_.reserve(bytes, &base).ok()) return nullptr;
    auto give_back = [&](bool mapped) {
      if (mapped) backend_.unmap(base, bytes);
      backend_.release(base, bytes);
      return nullptr;
    };
    if (!backend_.map(base, bytes).ok()) return give_back(false);
    if (base % kPatternBytes != 0 ||
        !write_canary(backend_, base, bytes, table_->scratch, SlotTable::kScratchBytes).ok())
      return give_back(true);
    // A probe proves the device-side copy works and waits for itself: 64 bytes cleared, then
    // copied back from elsewhere in the image, must read back as the pattern.
    unsigned char probe[64];
    const std::uintptr_t to = base + kPatternBytes + 3, from = base + 3;
    if (!backend_.fill(to, 0, sizeof probe).ok() || !backend_.copy_within(to, from, sizeof probe).ok() ||
        !backend_.read(probe, to, sizeof probe).ok())
      return give_back(true);
    for (std::size_t i = 0; i < sizeof probe; ++i)
      if (probe[i] != canary_byte(to + i)) return give_back(true);
    table_->pattern_image = {base, bytes};
  }
  return table_->pattern_image.bytes != 0 ? &table_->pattern_image : nullptr;
}

// A side of at least a pattern period is copied on the device from the image, which never
// changes once made (it lives as long as the allocator): no lock is held through the copy and
// its wait, so other threads' canaries and checks go on meanwhile. A shorter side (a tail-mode
// buffer's alignment padding: one small copy from the host costs less than a device-side copy
// and its wait), or one whose copy failed, is staged through `scratch`, under its lock.
device::Status GuardAllocator::write_device_canaries(const CanaryRanges& ranges) noexcept {
  const PatternImage* image = nullptr;
  {
    std::lock_guard<std::mutex> lock(table_->scratch_mutex);
    image = pattern_image_locked();
  }
  auto write_side = [&](std::uintptr_t begin, std::size_t bytes) {
    if (bytes == 0) return device::Status::success();
    if (image != nullptr && bytes >= kPatternBytes && copy_canary_from_image(backend_, begin, bytes, *image).ok())
      return device::Status::success();
    std::lock_guard<std::mutex> staging(table_->scratch_mutex);
    return write_canary(backend_, begin, bytes, table_->scratch, SlotTable::kScratchBytes);
  };
  device::Status written = write_side(ranges.before, ranges.before_bytes);
  return written.ok() ? write_side(ranges.after, ranges.after_bytes) : written;
}

void GuardAllocator::free_pattern_image() noexcept {
  if (table_->pattern_image.bytes == 0) return;
  backend_.unmap(table_->pattern_image.base, table_->pattern_image.bytes);
  backend_.release(table_->pattern_image.base, table_->pattern_image.bytes);
  table_->pattern_image = {};
}

}  // namespace mate::guard
