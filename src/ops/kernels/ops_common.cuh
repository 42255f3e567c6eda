// MATE reference kernels: element types shared by the CUDA kernel templates. The conversions are
// the host kernels' (ops_common.h), bit for bit: bf16 -> f32 exact, f32 -> bf16 round to nearest
// even. Raw 16-bit patterns keep the modules independent of cuda_bf16.h's version.
#pragma once

#include <cstdint>

#include "mate/jit/module_abi.h"

namespace mate_ops {

struct bf16_t {
  std::uint16_t bits;
};

__device__ inline float to_f32(float v) { return v; }
__device__ inline float to_f32(bf16_t v) { return __uint_as_float(static_cast<unsigned>(v.bits) << 16); }

template <class T>
__device__ T from_f32(float v);
template <>
__device__ inline float from_f32<float>(float v) { return v; }
template <>
__device__ inline bf16_t from_f32<bf16_t>(float v) {
  unsigned u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16_t{static_cast<std::uint16_t>(u >> 16)};
}

// Every launcher runs on the legacy default stream and waits for the kernel, so the reference
// kernels are synchronous like their host twins; the return value is the cudaError_t.
// Makes `device` current for this thread (tensors name their device; the launch follows them).
inline int use_device(int device) { return static_cast<int>(cudaSetDevice(device)); }

inline int finish_launch() {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return static_cast<int>(e);
}

// Blocks for a 1-D grid over the tile x tile output tiles of an m x n output: one per tile, at
// most 2^31 - 1 (gridDim.x's limit); the kernels stride over any remaining tiles.
inline unsigned tile_blocks(long m, long n, int tile) {
  long tiles = ((m + tile - 1) / tile) * ((n + tile - 1) / tile);
  return static_cast<unsigned>(tiles < 0x7fffffffL ? tiles : 0x7fffffffL);
}

}  // namespace mate_ops

// The text of a cudaError_t returned by a launcher, for the caller's error message.
MATE_MODULE_EXPORT const char* mate_ops_cuda_error_string(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}
