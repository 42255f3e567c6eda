// mate/core/signal_safe_format.hpp — integers as text, for code that runs where almost nothing
// may be called: signal handlers (a crash-context provider, the guard's fault handler) and the
// guard's malloc interposer.
//
// Contract: async-signal-safe. No allocation, no locale, no stdio, no locks, no errno: the text
// is built in a fixed buffer inside the returned value, on the caller's stack. Lowercase hex
// digits, no "0x", no leading zeros ("0" for zero).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mate::core {

// Room for the longest text below: "-9223372036854775808" (20 characters) and its NUL.
inline constexpr std::size_t kNumberTextCapacity = 21;

// The digits of one number, NUL-terminated.
struct NumberText {
  char chars[kNumberTextCapacity];
  std::size_t size;  // characters before the NUL
  const char* c_str() const noexcept { return chars; }
};

NumberText decimal_text(std::uint64_t value) noexcept;
NumberText signed_decimal_text(std::int64_t value) noexcept;  // "-" before negative values
NumberText hex_text(std::uint64_t value) noexcept;

}  // namespace mate::core
