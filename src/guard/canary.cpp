#include "canary.hpp"

#include <algorithm>

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

device::Status write_canary(device::Backend& backend, std::uintptr_t begin, std::size_t bytes,
                            unsigned char* scratch, std::size_t scratch_bytes) noexcept {
  if (backend.kind() == device::Kind::Host) {
    auto* p = reinterpret_cast<unsigned char*>(begin);
    for (std::size_t i = 0; i < bytes; ++i) p[i] = canary_byte(begin + i);
    return device::Status::success();
  }
  for (std::size_t done = 0; done < bytes;) {
    std::size_t n = std::min(scratch_bytes, bytes - done);
    for (std::size_t i = 0; i < n; ++i) scratch[i] = canary_byte(begin + done + i);
    device::Status s = backend.write(begin + done, scratch, n);
    if (!s.ok()) return s;
    done += n;
  }
  return device::Status::success();
}

device::Status check_canary(device::Backend& backend, std::uintptr_t begin, std::size_t bytes,
                            unsigned char* scratch, std::size_t scratch_bytes,
                            CanaryCheck* check) noexcept {
  if (backend.kind() == device::Kind::Host) {
    compare(reinterpret_cast<const unsigned char*>(begin), begin, bytes, check);
    return device::Status::success();
  }
  for (std::size_t done = 0; done < bytes;) {
    std::size_t n = std::min(scratch_bytes, bytes - done);
    device::Status s = backend.read(scratch, begin + done, n);
    if (!s.ok()) return s;
    compare(scratch, begin + done, n, check);
    done += n;
  }
  return device::Status::success();
}

}  // namespace mate::guard
