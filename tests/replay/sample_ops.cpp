#include "sample_ops.hpp"

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "mate/log/api.hpp"
#include "mate/replay/registry.hpp"
#include "mate/tensor/tensor_view.hpp"

namespace sample {

namespace {

#ifdef MATE_SAMPLE_CHANGED
float g_bias = 0.5f;  // the "changed kernel" build of this library
constexpr std::int64_t kIncrement = 3;
constexpr bool kInvert = false;
#else
float g_bias = 0.0f;
constexpr std::int64_t kIncrement = 1;
constexpr bool kInvert = true;
#endif

// Address of element i (row-major logical index) of a 1-D or 2-D f32 tensor.
float* at(const DLTensor* t, std::int64_t i) {
  mate::tensor::TensorView v(*t);
  std::int64_t off = 0;
  for (int d = v.ndim() - 1; d >= 0; --d) {
    off += (i % v.shape(d)) * v.stride(d);
    i /= v.shape(d);
  }
  return reinterpret_cast<float*>(v.origin()) + off;
}

std::int64_t numel(const DLTensor* t) { return mate::tensor::TensorView(*t).numel(); }

}  // namespace

void set_bias(float bias) { g_bias = bias; }

void axpy(const DLTensor* x, const DLTensor* y, DLTensor* out, float alpha) {
  MATE_API("sample.axpy", x, y, out, alpha).outputs(MATE_ARGS(out)).run([&] {
    for (std::int64_t i = 0; i < numel(out); ++i) *at(out, i) = alpha * *at(x, i) + *at(y, i) + g_bias;
  });
}

void scale_inplace(DLTensor* x, double factor, Rounding mode, const std::string& note) {
  MATE_API("sample.scale_inplace", x, factor, mode, note).outputs(MATE_ARGS(x)).run([&] {
    for (std::int64_t i = 0; i < numel(x); ++i) *at(x, i) = static_cast<float>(*at(x, i) * factor) + g_bias;
  });
}

float sum(const DLTensor* x) {
  return MATE_API("sample.sum", x).run([&] {
    float s = g_bias;
    for (std::int64_t i = 0; i < numel(x); ++i) s += *at(x, i);
    return s;
  });
}

void copy_or_throw(const DLTensor* x, DLTensor* out, bool fail) {
  MATE_API("sample.copy_or_throw", x, out, fail).outputs(MATE_ARGS(out)).run([&] {
    if (fail) throw std::invalid_argument("copy_or_throw: asked to fail");
    for (std::int64_t i = 0; i < numel(out); ++i) *at(out, i) = *at(x, i) + g_bias;
  });
}

void current_device(const DLTensor* x, DLTensor* out) {
  MATE_API("sample.current_device", x, out).outputs(MATE_ARGS(out)).run([&] {
    int ordinal = -1;
#ifdef MATE_FAKE_DRIVER_LIBRARY
    // The fake as MATE loaded it (never loaded here: RTLD_NOLOAD).
    if (void* fake = dlopen(MATE_FAKE_DRIVER_LIBRARY, RTLD_NOW | RTLD_NOLOAD)) {
      using GetDevice = int (*)(int*);
      auto get = reinterpret_cast<GetDevice>(dlsym(fake, "cuCtxGetDevice"));
      if (get == nullptr || get(&ordinal) != 0) ordinal = -1;
      dlclose(fake);
    }
#endif
    *at(out, 0) = static_cast<float>(ordinal);
    (void)x;
  });
}

std::int64_t increment_i64(const DLTensor* x, DLTensor* out) {
  return MATE_API("sample.increment_i64", x, out).outputs(MATE_ARGS(out)).run([&] {
    const auto* in = static_cast<const std::int64_t*>(x->data);
    auto* o = static_cast<std::int64_t*>(out->data);
    for (std::int64_t i = 0; i < numel(out); ++i) o[i] = in[i] + kIncrement;
    return o[0];
  });
}

std::uint64_t increment_u64(const DLTensor* x, DLTensor* out) {
  return MATE_API("sample.increment_u64", x, out).outputs(MATE_ARGS(out)).run([&] {
    const auto* in = static_cast<const std::uint64_t*>(x->data);
    auto* o = static_cast<std::uint64_t*>(out->data);
    for (std::int64_t i = 0; i < numel(out); ++i) o[i] = in[i] + static_cast<std::uint64_t>(kIncrement);
    return o[0];
  });
}

bool invert_bool(const DLTensor* x, DLTensor* out) {
  return MATE_API("sample.invert_bool", x, out).outputs(MATE_ARGS(out)).run([&] {
    const auto* in = static_cast<const bool*>(x->data);
    auto* o = static_cast<bool*>(out->data);
    for (std::int64_t i = 0; i < numel(out); ++i) o[i] = kInvert ? !in[i] : in[i];
    return o[0];
  });
}

void double_e8m0(const DLTensor* x, DLTensor* out) {
  MATE_API("sample.double_e8m0", x, out).outputs(MATE_ARGS(out)).run([&] {
    const auto* in = static_cast<const std::uint8_t*>(x->data);
    auto* o = static_cast<std::uint8_t*>(out->data);
    for (std::int64_t i = 0; i < numel(out); ++i) o[i] = static_cast<std::uint8_t>(in[i] + kIncrement);
  });
}

void prefix_step(const DLTensor* x, DLTensor* out) {
  MATE_API("sample.prefix_step", x, out).outputs(MATE_ARGS(out)).run([&] {
    for (std::int64_t i = 0; i < numel(out); ++i) *at(out, i) = *at(x, i) + (i > 0 ? *at(x, i - 1) : 0.0f) + g_bias;
  });
}

namespace {

float from_half(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(static_cast<float>(m | 0x400), e - 25);
  return (h & 0x8000) ? -v : v;  // (no inf/NaN in the tests' values)
}

// Element i (row-major logical index) of a tensor of any supported dtype and layout, as a double.
double element(const DLTensor* t, std::int64_t i) {
  mate::tensor::TensorView v(*t);
  std::int64_t off = 0;
  for (int d = v.ndim() - 1; d >= 0; --d) {
    off += (i % v.shape(d)) * v.stride(d);
    i /= v.shape(d);
  }
  const auto* p = reinterpret_cast<const unsigned char*>(v.origin()) + off * static_cast<std::int64_t>(v.element_size());
  const DLDataType dt = t->dtype;
  if (dt.code == kDLFloat && dt.bits == 32) return *reinterpret_cast<const float*>(p);
  if (dt.code == kDLFloat && dt.bits == 16) return from_half(*reinterpret_cast<const std::uint16_t*>(p));
  if (dt.code == kDLBfloat) {
    const std::uint32_t bits = static_cast<std::uint32_t>(*reinterpret_cast<const std::uint16_t*>(p)) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  if (dt.code == kDLInt && dt.bits == 8) return *reinterpret_cast<const std::int8_t*>(p);
  if (dt.code == kDLUInt && dt.bits == 32) return *reinterpret_cast<const std::uint32_t*>(p);
  if (dt.bits == 8) return *p;  // bool, u8
  throw std::invalid_argument("sample.mixed: unsupported dtype");
}

}  // namespace

void mixed(const DLTensor* a, const DLTensor* b, const DLTensor* c, const DLTensor* d, const DLTensor* e,
           const DLTensor* f, const DLTensor* g, const DLTensor* h, const DLTensor* k, DLTensor* out) {
  MATE_API("sample.mixed", a, b, c, d, e, f, g, h, k, out).outputs(MATE_ARGS(out)).run([&] {
    const DLTensor* inputs[] = {a, b, c, d, e, f, g, h, k};
    for (std::int64_t n = 0; n < 9; ++n) {
      double s = g_bias;
      for (std::int64_t i = 0; i < numel(inputs[n]); ++i) s += static_cast<double>(i + 1) * element(inputs[n], i);
      *at(out, n) = static_cast<float>(s);
    }
  });
}

void crash(const DLTensor* x) {
  MATE_API("sample.crash", x).run([&] { std::abort(); });
}

void write_past_end(DLTensor* out, int count) {
  MATE_API("sample.write_past_end", out, count).outputs(MATE_ARGS(out)).run([&] {
    float* p = at(out, 0);
    for (int i = 0; i <= count; ++i) p[i] = static_cast<float>(i);  // one element too many
  });
}

}  // namespace sample

MATE_REPLAYABLE("sample.axpy", &sample::axpy, "x", "y", "out", "alpha");
MATE_REPLAYABLE("sample.scale_inplace", &sample::scale_inplace);
MATE_REPLAYABLE("sample.sum", &sample::sum);
MATE_REPLAYABLE("sample.copy_or_throw", &sample::copy_or_throw);
MATE_REPLAYABLE("sample.current_device", &sample::current_device);
MATE_REPLAYABLE("sample.increment_i64", &sample::increment_i64);
MATE_REPLAYABLE("sample.increment_u64", &sample::increment_u64);
MATE_REPLAYABLE("sample.invert_bool", &sample::invert_bool);
MATE_REPLAYABLE("sample.write_past_end", &sample::write_past_end);
MATE_REPLAYABLE("sample.prefix_step", &sample::prefix_step);
MATE_REPLAYABLE("sample.crash", &sample::crash);
MATE_REPLAYABLE("sample.mixed", &sample::mixed);
MATE_REPLAYABLE("sample.double_e8m0", &sample::double_e8m0);
