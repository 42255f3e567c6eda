// Numbers as the text log writes them, exactly as printf would: "%.6g" (statistics) and "%.1f"
// (a call's wall time in microseconds); and addresses, "0x" and lowercase hexadecimal.
//
// Why by hand: std::to_chars with a precision (and fmt's precision formatting) take ~100 ns per
// value here, six statistics per tensor at level 5. The common case is done with one
// multiplication by an exact power of ten and a rounding that is unambiguous unless the scaled
// value lies within 1e-6 of a tie; those values, and any outside the fast range, go to
// std::to_chars, whose result this always equals (tests/log/test_number_text.cpp).
#pragma once

#include <cstdint>

namespace mate::log::detail {

// Room `write_general6` and `write_fixed1` may use.
inline constexpr int kGeneral6Max = 32;
inline constexpr int kFixed1Max = 320;  // -DBL_MAX: a sign, 309 digits, ".0"
inline constexpr int kAddressMax = 2 + 16;

// Writes `v` as printf("%.6g") does at `out`; returns the end.
char* write_general6(double v, char* out) noexcept;
// Writes `v` as printf("%.1f") does at `out`; returns the end.
char* write_fixed1(double v, char* out) noexcept;
// Writes "0x" and `a` in lowercase hexadecimal without leading zeros ("0x0" for zero: printf's
// "%#lx" but for zero) at `out`; returns the end. Two digits per table lookup (std::to_chars
// in base 16 took ~18 ns an address here, four per logged call).
char* write_address(std::uintptr_t a, char* out) noexcept;

}  // namespace mate::log::detail
