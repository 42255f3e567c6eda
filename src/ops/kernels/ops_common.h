// MATE reference kernels: element types shared by the host kernel templates.
// bf16 travels as its 16-bit pattern; conversions are exact (bf16 -> f32) and round to nearest
// even (f32 -> bf16, NaN stays NaN), matching PyTorch's and CUDA's __float2bfloat16.
#pragma once

#include <cstdint>
#include <cstring>

namespace mate_ops {

struct bf16_t {
  std::uint16_t bits;
};

inline float to_f32(float v) { return v; }
inline float to_f32(bf16_t v) {
  std::uint32_t u = static_cast<std::uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <class T>
T from_f32(float v);
template <>
inline float from_f32<float>(float v) { return v; }
template <>
inline bf16_t from_f32<bf16_t>(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{static_cast<std::uint16_t>((u >> 16) | 0x40u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return bf16_t{static_cast<std::uint16_t>(u >> 16)};
}

}  // namespace mate_ops
