// A tiny instrumented "kernel library" for the replay tests: host f32 kernels that honour
// strides and byte offsets, each logged with MATE_API and registered with MATE_REPLAYABLE.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>

namespace sample {

enum class Rounding { Nearest = 0, Down = 1 };

// out = alpha * x + y + bias (bias: see set_bias).
void axpy(const DLTensor* x, const DLTensor* y, DLTensor* out, float alpha);
// x *= factor, in place; `mode` is only recorded.
void scale_inplace(DLTensor* x, double factor, Rounding mode, const std::string& note);
// The sum of x's elements.
float sum(const DLTensor* x);
// Throws std::invalid_argument when `fail` is true; otherwise out = x.
void copy_or_throw(const DLTensor* x, DLTensor* out, bool fail);
// out[0] = the ordinal of the device current on the calling thread, as the fake driver says
// (-1: none, or no fake driver loaded): what a library launching on the current device would use.
void current_device(const DLTensor* x, DLTensor* out);
// out = x + 1 over 1-D contiguous i64 tensors (+ 3 in the changed build); returns out[0].
std::int64_t increment_i64(const DLTensor* x, DLTensor* out);
// out = x + 1 over 1-D contiguous u64 tensors (+ 3 in the changed build); returns out[0].
std::uint64_t increment_u64(const DLTensor* x, DLTensor* out);
// out = !x over 1-D contiguous bool tensors (out = x in the changed build); returns out[0].
bool invert_bool(const DLTensor* x, DLTensor* out);
// out[i] = x[i] + x[i - 1] (x[-1] = 0), element by element in order: when out aliases x (in
// place, or a view one element further on) later elements read earlier results, so the result
// depends on the aliasing.
void prefix_step(const DLTensor* x, DLTensor* out);
// out[k] = sum over i of (i + 1) * element i (row-major logical order) of the k-th input, for
// inputs of any layout (strides negative, zero, gaps) and dtype f32, f16, bf16, i8, u32, bool:
// the result depends on every value and on the order, so a layout restored wrongly shows.
void mixed(const DLTensor* a, const DLTensor* b, const DLTensor* c, const DLTensor* d, const DLTensor* e,
           const DLTensor* f, const DLTensor* g, const DLTensor* h, const DLTensor* k, DLTensor* out);
// Aborts the process (a replayed call that crashes).
void crash(const DLTensor* x);
// Writes one element past the end of out (the out-of-bounds kernel for --guard-alloc).
void write_past_end(DLTensor* out, int count);
// Doubles float8_e8m0fnu scales (DLPack code 14: a biased exponent byte; the changed kernel
// multiplies by 8): a dtype MATE does not decode, which replay compares bit for bit.
void double_e8m0(const DLTensor* x, DLTensor* out);

// What the kernels add to every result: the test's way of "changing the kernel".
void set_bias(float bias);

}  // namespace sample
