// printf-exact "%.6g" and "%.1f", fast for the common values (see number_text.hpp).
#include "number_text.hpp"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "mate/core/digit_pairs.hpp"

#if defined(__SSE2__) && defined(__x86_64__)
#define MATE_HEX_SSE2 1
#include <emmintrin.h>
#else
#define MATE_HEX_SSE2 0
#endif

namespace mate::log::detail {

namespace {

// 10^0 .. 10^22: every one exact in a double.
constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// `x` rounded to the nearest integer, when a double holding x (one rounding from the exact
// value) leaves no doubt which integer that is; false near a tie (the caller then asks
// std::to_chars, which rounds the exact value).
// x >= 0 and below 2^63 (a truncating conversion is the floor: no libm call).
bool round_unambiguous(double x, std::uint64_t& rounded) noexcept {
  const auto whole = static_cast<std::uint64_t>(x);
  const double frac = x - static_cast<double>(whole);
  if (std::fabs(frac - 0.5) < 1e-6) return false;
  rounded = whole + (frac > 0.5 ? 1 : 0);
  return true;
}

char* write_digits(char* out, std::uint64_t v, int count) noexcept {
  for (int i = count - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return out + count;
}

using core::kDigitPairs;

#if !MATE_HEX_SSE2
// "00", "01", ... "ff".
constexpr auto kHexPairs = [] {
  struct Pairs {
    char c[512];
  } t{};
  constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 256; ++i) {
    t.c[2 * i] = kHex[i >> 4];
    t.c[2 * i + 1] = kHex[i & 15];
  }
  return t;
}();
#endif

// The six digits of m (100000 <= m <= 999999) as characters in one integer, the first digit in
// the lowest byte, then two '0's: three independent pairs (one digit per division by ten would
// chain six dependent divisions). Kept in a register, not in a char array: the stores below then
// never read back bytes just stored by narrower writes (a stalled store forwarding, ~15 cycles).
std::uint64_t six_digits(std::uint32_t m) noexcept {
  static_assert(std::endian::native == std::endian::little, "digits are placed by byte order");
  const std::uint32_t high = m / 10000, rest = m % 10000;
  const std::uint32_t mid = rest / 100, low = rest % 100;
  std::uint16_t h, md, l;
  std::memcpy(&h, kDigitPairs.c + 2 * high, 2);
  std::memcpy(&md, kDigitPairs.c + 2 * mid, 2);
  std::memcpy(&l, kDigitPairs.c + 2 * low, 2);
  return h | std::uint64_t{md} << 16 | std::uint64_t{l} << 32 | std::uint64_t{0x3030} << 48;
}

// Eight bytes at out (the callers have room): the digits from the k-th on.
void store_digits(char* out, std::uint64_t digits, int k) noexcept {
  const std::uint64_t shifted = digits >> (8 * k);
  std::memcpy(out, &shifted, 8);
}

char* general6_slow(double v, char* out) noexcept {
  return std::to_chars(out, out + kGeneral6Max, v, std::chars_format::general, 6).ptr;
}

// Zero (common in statistics: zeroed outputs; printf keeps the sign, "-0"), and what the fast
// path's range leaves out.
char* general6_rare(double v, char* out) noexcept {
  if (v == 0) {
    if (std::signbit(v)) *out++ = '-';
    *out++ = '0';
    return out;
  }
  return general6_slow(v, out);
}

}  // namespace

char* write_general6(double v, char* out) noexcept {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  // The decimal exponent: floor(log10(|v|)), first estimated from the binary one (too small by
  // at most one), so that the six digits are |v| * 10^(5 - e).
  // |v| in [2^b, 2^(b+1)) for a normal v; floor(b * log10(2)) is (b * 78913) >> 18 for |b| < 1650.
  int e = ((biased - 1023) * 78913) >> 18;
  // Zero, subnormals, Inf and NaN (biased exponent 0 or 0x7ff) fall outside too.
  if (static_cast<unsigned>(e + 17) > 43u) [[unlikely]] return general6_rare(v, out);
  const double a = std::bit_cast<double>(bits & 0x7fffffffffffffffull);
  double scaled = e <= 5 ? a * kPow10[5 - e] : a / kPow10[e - 5];
  if (scaled >= 1e6) {  // the estimate was one too small (at 1e6 itself both give the same digits)
    ++e;
    scaled = e <= 5 ? a * kPow10[5 - e] : a / kPow10[e - 5];
  }
  // Rounded to the nearest integer by adding 2^52 (whose ulp is 1): the integer is then the low
  // bits of the sum. Unless the value lies within 1e-6 of a tie (std::to_chars then rounds the
  // exact value), the rounding mode in force cannot have changed which integer that is.
  const double big = scaled + 0x1p52;
  std::uint64_t m = std::bit_cast<std::uint64_t>(big) & 0xfffffffffffffull;
  if (std::fabs(scaled - (big - 0x1p52)) > 0.5 - 1e-6) [[unlikely]] return general6_slow(v, out);
  if (m == 1000000) {  // rounded up into the next decade: 9.999996 -> 10.0000
    m = 100000;
    ++e;
  }
  if (m < 100000 || m > 999999) [[unlikely]] return general6_slow(v, out);

  const std::uint64_t d = six_digits(static_cast<std::uint32_t>(m));
  // Significant digits kept (%g drops trailing zeros): up to the last digit that is not '0', the
  // highest byte of d that differs from '0' (the first digit is never '0': m >= 100000).
  const int n = (63 - std::countl_zero(d ^ 0x3030303030303030ull)) / 8 + 1;
  if (v < 0) *out++ = '-';
  // Below, fixed-size stores (no loop whose length varies from value to value); the end returned
  // keeps what belongs to the number.
  if (e < -4 || e >= 6) {
    store_digits(out, d, 0);
    if (n > 1) {
      out[1] = '.';
      store_digits(out + 2, d, 1);
      out += n + 1;
    } else {
      out += 1;
    }
    *out++ = 'e';
    *out++ = e < 0 ? '-' : '+';
    const int x = e < 0 ? -e : e;
    return write_digits(out, static_cast<std::uint64_t>(x), x >= 100 ? 3 : 2);
  }
  if (e >= 0) {  // e + 1 digits before the point, the rest of the n after it
    store_digits(out, d, 0);
    if (n <= e + 1) return out + e + 1;
    out[e + 1] = '.';
    store_digits(out + e + 2, d, e + 1);
    return out + n + 1;
  }
  // e in [-4, -1]: "0.", -e - 1 zeros, the n digits.
  std::memcpy(out, "0.000", 5);
  out += 1 - e;
  store_digits(out, d, 0);
  return out + n;
}

char* write_exact_short(double v, char* out) noexcept {
  // The fraction's digits for each sixteenth, and the bound on the whole part that keeps the
  // expansion within seven significant digits.
  struct Sixteenth {
    char digits[5];
    unsigned char size;
    std::uint32_t whole_below;
  };
  static constexpr Sixteenth kSixteenths[16] = {
      {"", 0, 10000000},    {"0625", 4, 1000}, {"125", 3, 10000},  {"1875", 4, 1000}, {"25", 2, 100000},
      {"3125", 4, 1000},    {"375", 3, 10000}, {"4375", 4, 1000},  {"5", 1, 1000000}, {"5625", 4, 1000},
      {"625", 3, 10000},    {"6875", 4, 1000}, {"75", 2, 100000},  {"8125", 4, 1000}, {"875", 3, 10000},
      {"9375", 4, 1000}};
  const double sixteenths = std::fabs(v) * 16;  // exact: a power of two
  if (!(sixteenths < 16e7)) return nullptr;     // (NaN too)
  const auto n = static_cast<std::uint32_t>(sixteenths);
  if (static_cast<double>(n) != sixteenths) return nullptr;
  const Sixteenth& f = kSixteenths[n & 15];
  const std::uint32_t whole = n >> 4;
  if (whole >= f.whole_below) return nullptr;
  if (std::signbit(v)) *out++ = '-';  // "-0", as fmt writes it
  out = std::to_chars(out, out + 8, whole).ptr;
  if (f.size != 0) {
    *out = '.';
    std::memcpy(out + 1, f.digits, 4);  // fixed size; the end below keeps f.size of them
    out += 1 + f.size;
  }
  return out;
}

char* write_fixed1(double v, char* out) noexcept {
  std::uint64_t tenths = 0;
  // Below 1e14 tenths fit a double's 53 bits with room for the tie check.
  if (std::isfinite(v) && std::fabs(v) < 1e14 && round_unambiguous(std::fabs(v) * 10, tenths)) {
    if (std::signbit(v)) *out++ = '-';  // printf keeps the sign of -0.04 ("-0.0")
    const auto r = std::to_chars(out, out + kFixed1Max, tenths / 10);
    out = r.ptr;
    *out++ = '.';
    *out++ = static_cast<char>('0' + tenths % 10);
    return out;
  }
  return std::to_chars(out, out + kFixed1Max, v, std::chars_format::fixed, 1).ptr;
}

char* write_address(std::uintptr_t a, char* out) noexcept {
  out[0] = '0';
  out[1] = 'x';
  const int digits = a == 0 ? 1 : (std::bit_width(a) + 3) / 4;
#if MATE_HEX_SSE2
  // All sixteen digits at once (four per logged tensor line; the byte loop below took ~45
  // instructions an address): the significant digits shifted to the top, the bytes in writing
  // order, each split into its two nibbles, each nibble made a character; one 16-byte store, of
  // which `digits` are kept (kAddressMax allows the rest).
  static_assert(sizeof(std::uintptr_t) == 8, "sixteen hex digits");
  const std::uint64_t first = __builtin_bswap64(static_cast<std::uint64_t>(a) << (4 * (16 - digits)));
  const __m128i bytes = _mm_cvtsi64_si128(static_cast<long long>(first));
  const __m128i low_nibble = _mm_set1_epi8(0x0f);
  const __m128i nibbles = _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibble),
                                            _mm_and_si128(bytes, low_nibble));
  const __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(nibbles, _mm_set1_epi8(9)), _mm_set1_epi8('a' - '0' - 10));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2), _mm_add_epi8(_mm_add_epi8(nibbles, _mm_set1_epi8('0')), letter));
  return out + 2 + digits;
#else
  char* const end = out + 2 + digits;
  char* p = end;
  for (; a >= 0x100; a >>= 8) {
    p -= 2;
    std::memcpy(p, kHexPairs.c + 2 * (a & 0xff), 2);
  }
  if (a >= 0x10) {
    std::memcpy(p - 2, kHexPairs.c + 2 * a, 2);
  } else {
    p[-1] = kHexPairs.c[2 * a + 1];
  }
  return end;
#endif
}

}  // namespace mate::log::detail
