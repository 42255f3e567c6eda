// Canary fill and check through the backend, in staging-buffer chunks for device memory (see
// canary.hpp).
#include "guard/canary.hpp"

#include <algorithm>
#include <cstring>

namespace mate::guard {

namespace {

void compare(const unsigned char* bytes, std::uintptr_t address, std::size_t n, CanaryCheck* check) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char want = canary_byte(address + i);
    if (bytes[i] == want) {
      // Keep showing bytes after the first difference, intact or not, for context.
      if (check->differing > 0 && check->shown < kShownBytes &&
          address + i == check->first + static_cast<std::size_t>(check->shown)) {
        check->expected[check->shown] = want;
        check->found[check->shown++] = bytes[i];
      }
      continue;
    }
    if (check->differing++ == 0) check->first = address + i;
    if (check->shown < kShownBytes && address + i == check->first + static_cast<std::size_t>(check->shown)) {
      check->expected[check->shown] = want;
      check->found[check->shown++] = bytes[i];
    }
  }
}

}  // namespace

// Calls f(address, pattern_pointer, n) over [begin, begin + bytes) in runs that do not wrap
// around the pattern table.
template <class F>
void for_each_run(std::uintptr_t begin, std::size_t bytes, F f) noexcept {
  for (std::size_t done = 0; done < bytes;) {
    std::uintptr_t a = begin + done;
    std::size_t offset = a & (kPatternBytes - 1);
    std::size_t n = std::min(kPatternBytes - offset, bytes - done);
    f(a, kPattern.bytes + offset, n);
    done += n;
  }
}

device::Status write_canary(device::Backend& backend, std::uintptr_t begin, std::size_t bytes,
                            unsigned char* scratch, std::size_t scratch_bytes) noexcept {
  if (backend.kind() == device::Kind::Host) {
    for_each_run(begin, bytes, [](std::uintptr_t a, const unsigned char* pattern, std::size_t n) {
      std::memcpy(reinterpret_cast<void*>(a), pattern, n);
    });
    return device::Status::success();
  }
  // The staging chunk is filled by copying runs of the pattern table: a byte-by-byte fill cost
  // ~1 ms per MiB, and a small device buffer's canary fills the rest of its granule (2 MiB).
  for (std::size_t done = 0; done < bytes;) {
    std::size_t n = std::min(scratch_bytes, bytes - done);
    const std::uintptr_t chunk = begin + done;
    for_each_run(chunk, n, [scratch, chunk](std::uintptr_t a, const unsigned char* pattern, std::size_t m) {
      std::memcpy(scratch + (a - chunk), pattern, m);
    });
    device::Status s = backend.write(chunk, scratch, n);
    if (!s.ok()) return s;
    done += n;
  }
  return device::Status::success();
}

device::Status check_canary(device::Backend& backend, std::uintptr_t begin, std::size_t bytes,
                            unsigned char* scratch, std::size_t scratch_bytes,
                            CanaryCheck* check) noexcept {
  if (backend.kind() == device::Kind::Host) {
    for_each_run(begin, bytes, [check](std::uintptr_t a, const unsigned char* pattern, std::size_t n) {
      // memcmp first (the common, intact case); the byte loop only for runs that differ or
      // that follow a difference (to show the bytes after it).
      if (check->differing == 0 && std::memcmp(reinterpret_cast<const void*>(a), pattern, n) == 0) return;
      compare(reinterpret_cast<const unsigned char*>(a), a, n, check);
    });
    return device::Status::success();
  }
  for (std::size_t done = 0; done < bytes;) {
    std::size_t n = std::min(scratch_bytes, bytes - done);
    const std::uintptr_t chunk = begin + done;
    device::Status s = backend.read(scratch, chunk, n);
    if (!s.ok()) return s;
    // As on the host: memcmp against the pattern, the byte loop only where something differs.
    for_each_run(chunk, n, [scratch, chunk, check](std::uintptr_t a, const unsigned char* pattern, std::size_t m) {
      const unsigned char* got = scratch + (a - chunk);
      if (check->differing == 0 && std::memcmp(got, pattern, m) == 0) return;
      compare(got, a, m, check);
    });
    done += n;
  }
  return device::Status::success();
}

}  // namespace mate::guard
