// Canary bytes: an address-dependent pattern, so a shifted copy of intact canary does not look
// intact. Written and checked through the backend (copies on a device, plain memory on the host).
#pragma once

#include <cstddef>
#include <cstdint>

#include "mate/device/backend.hpp"

namespace mate::guard {

// The canary byte expected at `address`; never 0 (zeroing memory is a common bug).
inline unsigned char canary_byte(std::uintptr_t address) noexcept {
  std::uint64_t x = static_cast<std::uint64_t>(address) * 0x9E3779B97F4A7C15ull;
  unsigned char b = static_cast<unsigned char>((x >> 56) ^ 0xA5);
  return b == 0 ? 0x5A : b;
}

inline constexpr int kShownBytes = 8;

struct CanaryCheck {
  std::size_t differing = 0;      // bytes that differ
  std::uintptr_t first = 0;       // address of the first differing byte
  int shown = 0;                  // bytes of expected/found from `first`
  unsigned char expected[kShownBytes] = {};
  unsigned char found[kShownBytes] = {};
};

// Writes / checks canary over [begin, begin + bytes). `scratch` (scratch_bytes, > 0) is a host
// buffer for device copies. Checking adds to *check.
device::Status write_canary(device::Backend& backend, std::uintptr_t begin, std::size_t bytes,
                            unsigned char* scratch, std::size_t scratch_bytes) noexcept;
device::Status check_canary(device::Backend& backend, std::uintptr_t begin, std::size_t bytes,
                            unsigned char* scratch, std::size_t scratch_bytes,
                            CanaryCheck* check) noexcept;

}  // namespace mate::guard
