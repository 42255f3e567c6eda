// Canary bytes: an address-dependent pattern, so a shifted copy of intact canary does not look
// intact. Written and checked through the backend (copies on a device, plain memory on the host).
#pragma once

#include <cstddef>
#include <cstdint>

#include "mate/device/backend.hpp"

namespace mate::guard {

// The pattern repeats every kPatternBytes of address: a table of pseudo-random bytes, none 0
// (zeroing memory is a common bug) and none equal to its neighbour (so a copy shifted by one
// byte never looks intact). A table makes writing and checking memcpy/memcmp speed.
inline constexpr std::size_t kPatternBytes = 4096;

struct Pattern {
  unsigned char bytes[kPatternBytes];
};

constexpr Pattern make_pattern() {
  Pattern p{};
  std::uint64_t x = 0x243F6A8885A308D3ull;  // splitmix64 from a fixed seed
  unsigned char previous = 0;
  for (std::size_t i = 0; i < kPatternBytes; ++i) {
    x += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    auto b = static_cast<unsigned char>(z >> 56);
    if (b == 0 || b == previous) b = static_cast<unsigned char>(b + 0x5B == 0 ? 0x5A : b + 0x5B);
    if (b == previous) b ^= 0x81;
    p.bytes[i] = b;
    previous = b;
  }
  return p;
}

inline constexpr Pattern kPattern = make_pattern();

// The canary byte expected at `address`.
inline unsigned char canary_byte(std::uintptr_t address) noexcept {
  return kPattern.bytes[address & (kPatternBytes - 1)];
}

inline constexpr int kShownBytes = 8;

struct CanaryCheck {
  std::size_t differing = 0;      // bytes that differ
  std::uintptr_t first = 0;       // address of the first differing byte
  int shown = 0;                  // bytes of expected/found from `first`
  unsigned char expected[kShownBytes] = {};
  unsigned char found[kShownBytes] = {};
};

// The pattern laid out in device memory: `bytes` (more than kPatternBytes) from `base`, a
// multiple of kPatternBytes, so that the canary for any address a starts at
// base + (a % kPatternBytes) (src/guard/device_canary.cpp).
struct PatternImage {
  std::uintptr_t base = 0;
  std::size_t bytes = 0;
};

// Writes / checks canary over [begin, begin + bytes). `scratch` (scratch_bytes, > 0) is a host
// buffer for device copies. Checking adds to *check.
device::Status write_canary(device::Backend& backend, std::uintptr_t begin, std::size_t bytes,
                            unsigned char* scratch, std::size_t scratch_bytes) noexcept;
device::Status check_canary(device::Backend& backend, std::uintptr_t begin, std::size_t bytes,
                            unsigned char* scratch, std::size_t scratch_bytes,
                            CanaryCheck* check) noexcept;

}  // namespace mate::guard
