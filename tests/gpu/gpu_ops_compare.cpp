// On a GPU: every CUDA reference kernel (mate::ops with kDLCUDA tensors, JIT-built by nvcc for
// the GPU's arch) against the host kernel on the same data. Exit 0 pass, 1 mismatch or error,
// 77 no GPU (skipped).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <vector>

#include "mate/ops/contiguous_layout.hpp"
#include "mate/ops/ops.hpp"

namespace {

int g_failures = 0;

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "FAIL: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// A tensor with a host copy and a device copy of the same bytes.
struct Pair {
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> host;
  void* device = nullptr;
  DLTensor h{}, d{};
  Pair(std::vector<std::int64_t> s, DLDataType dtype) : shape(std::move(s)) {
    std::int64_t n = 1;
    for (auto x : shape) n *= x;
    host.assign(static_cast<std::size_t>(n) * dtype.bits / 8, 0);
    check_cuda(cudaMalloc(&device, host.size() + 16), "cudaMalloc");
    h = DLTensor{host.data(), {kDLCPU, 0}, static_cast<int>(shape.size()), dtype, shape.data(), nullptr, 0};
    d = DLTensor{device, {kDLCUDA, 0}, static_cast<int>(shape.size()), dtype, shape.data(), nullptr, 0};
  }
  ~Pair() { cudaFree(device); }
  void random(std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    if (h.dtype.bits == 16) {
      for (std::size_t i = 0; i < host.size(); i += 2) {
        float f = dist(rng);
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        host[i] = static_cast<std::uint8_t>(u >> 16);
        host[i + 1] = static_cast<std::uint8_t>(u >> 24);
      }
    } else {
      for (std::size_t i = 0; i < host.size(); i += 4) {
        float f = dist(rng);
        std::memcpy(&host[i], &f, 4);
      }
    }
    upload();
  }
  void upload() { check_cuda(cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice), "upload"); }
  std::vector<std::uint8_t> download() const {
    std::vector<std::uint8_t> out(host.size());
    check_cuda(cudaMemcpy(out.data(), device, out.size(), cudaMemcpyDeviceToHost), "download");
    return out;
  }
};

float value(const std::vector<std::uint8_t>& bytes, std::size_t i, int bits) {
  float f;
  if (bits == 16) {
    std::uint32_t u = static_cast<std::uint32_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8)) << 16;
    std::memcpy(&f, &u, 4);
  } else {
    std::memcpy(&f, &bytes[4 * i], 4);
  }
  return f;
}

// Host result (in `out.host`) against the device result, relative to the magnitude.
void compare(const char* what, const Pair& out, double tolerance) {
  auto device = out.download();
  int bits = out.h.dtype.bits;
  std::size_t n = out.host.size() * 8 / bits;
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double a = value(out.host, i, bits), b = value(device, i, bits);
    worst = std::max(worst, std::abs(a - b) / (1 + std::abs(a)));
  }
  bool ok = worst <= tolerance;
  if (!ok) ++g_failures;
  std::printf("%s %-40s max relative difference %.2e (tolerance %.0e)\n", ok ? "PASS" : "FAIL", what, worst,
              tolerance);
}

void gemm_case(DLDataType type, std::int64_t m, std::int64_t n, std::int64_t k, std::mt19937& rng) {
  Pair a({m, k}, type), b({n, k}, type), out({m, n}, {kDLFloat, 32, 1});
  a.random(rng);
  b.random(rng);
  mate::ops::gemm_nt(&a.h, &b.h, &out.h, 1.5f);
  mate::ops::gemm_nt(&a.d, &b.d, &out.d, 1.5f);
  char what[80];
  std::snprintf(what, sizeof what, "gemm_nt %s m=%lld n=%lld k=%lld", type.bits == 16 ? "bf16" : "f32",
                static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k));
  compare(what, out, 1e-5 * (1 + k / 16.0));
}

void rmsnorm_case(DLDataType type, std::int64_t rows, std::int64_t hidden, std::mt19937& rng) {
  Pair x({rows, hidden}, type), w({hidden}, type), out({rows, hidden}, type);
  x.random(rng);
  w.random(rng);
  mate::ops::rmsnorm(&x.h, &w.h, &out.h, 1e-5f);
  mate::ops::rmsnorm(&x.d, &w.d, &out.d, 1e-5f);
  char what[80];
  std::snprintf(what, sizeof what, "rmsnorm %s rows=%lld hidden=%lld", type.bits == 16 ? "bf16" : "f32",
                static_cast<long long>(rows), static_cast<long long>(hidden));
  // The device sums squares in another order: f32 a few ulps; bf16 one rounding step.
  compare(what, out, type.bits == 16 ? 1.0 / 128 : 1e-5);
}

void grouped_case(DLDataType type, std::vector<std::int64_t> rows, std::int64_t n, std::int64_t k, std::mt19937& rng) {
  auto layout = mate::ops::make_contiguous_layout(rows);
  std::int64_t m_sum = layout.m_sum, groups = static_cast<std::int64_t>(rows.size());
  Pair lhs({m_sum, k}, type), rhs({groups, n, k}, type), out({m_sum, n}, {kDLFloat, 32, 1}),
      idx({m_sum}, {kDLInt, 32, 1});
  lhs.random(rng);
  rhs.random(rng);
  std::memcpy(idx.host.data(), layout.m_indices.data(), idx.host.size());
  idx.upload();
  mate::ops::m_grouped_gemm_nt_contiguous(&lhs.h, &rhs.h, &out.h, &idx.h);
  mate::ops::m_grouped_gemm_nt_contiguous(&lhs.d, &rhs.d, &out.d, &idx.d);
  char what[80];
  std::snprintf(what, sizeof what, "grouped_gemm_nt %s m_sum=%lld n=%lld k=%lld", type.bits == 16 ? "bf16" : "f32",
                static_cast<long long>(m_sum), static_cast<long long>(n), static_cast<long long>(k));
  compare(what, out, 1e-5 * (1 + k / 16.0));
}

}  // namespace

int main() try {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP: no CUDA device visible\n");
    return 77;
  }
  std::mt19937 rng(90);
  const DLDataType f32{kDLFloat, 32, 1}, bf16{kDLBfloat, 16, 1};
  for (auto type : {f32, bf16}) {
    gemm_case(type, 37, 45, 1, rng);
    gemm_case(type, 128, 96, 256, rng);
    rmsnorm_case(type, 5, 4096, rng);
    rmsnorm_case(type, 33, 100, rng);
    grouped_case(type, {3, 0, 130, 1}, 45, 33, rng);
  }
  // More rows than a 65535-block grid dimension of 16- or 32-row tiles holds (~1M or ~2M rows).
  gemm_case(f32, (std::int64_t{1} << 21) + 37, 3, 2, rng);
  grouped_case(f32, {(std::int64_t{1} << 21) + 5, 7}, 3, 2, rng);
  // A bad index on the device is found before the launch.
  {
    Pair lhs({128, 4}, f32), rhs({1, 2, 4}, f32), out({128, 2}, f32), idx({128}, {kDLInt, 32, 1});
    std::int32_t bad = 3;
    std::memcpy(idx.host.data(), &bad, 4);
    idx.upload();
    try {
      mate::ops::m_grouped_gemm_nt_contiguous(&lhs.d, &rhs.d, &out.d, &idx.d);
      std::printf("FAIL: a device m_indices entry out of range was not reported\n");
      ++g_failures;
    } catch (const mate::ops::ArgumentError& e) {
      std::printf("PASS device m_indices checked: %s\n", e.what());
    }
  }
  return g_failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "FAIL: %s\n", e.what());
  return 1;
}
