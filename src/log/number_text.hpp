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
// The shortest text that reads back as `v` (what fmt's "{}" writes, for a double or a float),
// when v is a multiple of 1/16 whose decimal expansion has at most seven significant digits:
// integers below 10^7 (0, 1, -3, 4096), 0.5, 0.0625, 12.375, ... (scalar arguments such as
// alpha, beta and scales are often such). Returns the end, or nullptr for any other value
// (nothing written). Room used: kExactShortMax.
// Why this is the shortest text: another decimal of at most seven significant digits differs
// from v by at least 1e-7 of v, more than half a float's (or double's) spacing there (2^-24
// of v), so none reads back as v.
char* write_exact_short(double v, char* out) noexcept;
inline constexpr int kExactShortMax = 16;  // "-9999999", "-999.9375"
// Writes `v` as printf("%.1f") does at `out`; returns the end.
char* write_fixed1(double v, char* out) noexcept;
// Writes "0x" and `a` in lowercase hexadecimal without leading zeros ("0x0" for zero: printf's
// "%#lx" but for zero) at `out`; returns the end. Two digits per table lookup (std::to_chars
// in base 16 took ~18 ns an address here, four per logged call).
char* write_address(std::uintptr_t a, char* out) noexcept;

}  // namespace mate::log::detail
