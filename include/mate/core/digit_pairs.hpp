// mate/core/digit_pairs.hpp — decimal digits two at a time, for the log's hand-written number
// text (timestamps, statistics): one table lookup per pair instead of a division per digit.
#pragma once

#include <cstring>

namespace mate::core {

// "00", "01", ... "99".
inline constexpr struct DigitPairs {
  char c[200];
} kDigitPairs = [] {
  DigitPairs t{};
  for (int i = 0; i < 100; ++i) {
    t.c[2 * i] = static_cast<char>('0' + i / 10);
    t.c[2 * i + 1] = static_cast<char>('0' + i % 10);
  }
  return t;
}();

// Writes v (0..99) as two digits at out.
inline void write_two_digits(char* out, unsigned v) noexcept { std::memcpy(out, kDigitPairs.c + 2 * v, 2); }

}  // namespace mate::core
