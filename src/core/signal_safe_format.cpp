// Integer-to-text without libc formatting; see include/mate/core/signal_safe_format.hpp for the
// contract (async-signal-safe: plain loops over stack buffers only).
#include "mate/core/signal_safe_format.hpp"

namespace mate::core {

namespace {

// The digits come out least significant first, so they are collected reversed, then copied.
NumberText digits_in_base(std::uint64_t value, unsigned base, bool negative) noexcept {
  char reversed[kNumberTextCapacity];
  std::size_t n = 0;
  do {
    reversed[n++] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value != 0);
  NumberText text{};
  text.size = 0;
  if (negative) text.chars[text.size++] = '-';
  while (n > 0) text.chars[text.size++] = reversed[--n];
  text.chars[text.size] = '\0';
  return text;
}

}  // namespace

NumberText decimal_text(std::uint64_t value) noexcept { return digits_in_base(value, 10, false); }

NumberText signed_decimal_text(std::int64_t value) noexcept {
  if (value >= 0) return digits_in_base(static_cast<std::uint64_t>(value), 10, false);
  // -(value + 1) + 1 is |value| without overflow, INT64_MIN included.
  return digits_in_base(static_cast<std::uint64_t>(-(value + 1)) + 1, 10, true);
}

NumberText hex_text(std::uint64_t value) noexcept { return digits_in_base(value, 16, false); }

}  // namespace mate::core
