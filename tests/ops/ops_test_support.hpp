// Shared pieces of the ops tests: host tensors that own their data, bf16 conversions, the naive
// reference kernels (double accumulation), and one module workspace for every test process.
#pragma once

#include <dlpack/dlpack.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "mate/config.hpp"
#include "ops/kernel_table.hpp"
#include "mate/tensor/dtype.hpp"
#include "temp_dir.hpp"

namespace mate::ops::testing {

inline std::uint16_t bf16_bits(float v) {  // round to nearest even, as the kernels
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float bf16_value(std::uint16_t bits) {
  std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A host tensor owning its bytes. values() reads it back as floats (bf16 widened).
class HostTensor {
 public:
  HostTensor(std::vector<std::int64_t> shape, tensor::ScalarType type) : shape_(std::move(shape)) {
    std::int64_t n = 1;
    for (auto d : shape_) n *= d;
    numel_ = n;
    t_.dtype = tensor::dl_dtype(type);
    bytes_.assign(static_cast<std::size_t>(n) * tensor::element_size(t_.dtype) + 16, 0);
    t_.data = bytes_.data();
    t_.device = {kDLCPU, 0};
    t_.ndim = static_cast<int>(shape_.size());
    t_.shape = shape_.data();
    t_.strides = nullptr;
    t_.byte_offset = 0;
  }
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;
  DLTensor* dl() { return &t_; }
  const DLTensor* cdl() const { return &t_; }
  std::int64_t numel() const { return numel_; }
  bool is_bf16() const { return tensor::scalar_type(t_.dtype) == tensor::ScalarType::BF16; }

  // Stores v (rounded to bf16 for bf16 tensors) and returns the value actually stored.
  float set(std::int64_t i, float v) {
    if (is_bf16()) {
      std::uint16_t b = bf16_bits(v);
      std::memcpy(base() + i * 2, &b, 2);
      return bf16_value(b);
    }
    if (tensor::scalar_type(t_.dtype) == tensor::ScalarType::I32) {
      std::int32_t x = static_cast<std::int32_t>(v);
      std::memcpy(base() + i * 4, &x, 4);
      return static_cast<float>(x);
    }
    std::memcpy(base() + i * 4, &v, 4);
    return v;
  }
  float get(std::int64_t i) const {
    if (is_bf16()) {
      std::uint16_t b;
      std::memcpy(&b, base() + i * 2, 2);
      return bf16_value(b);
    }
    float v;
    std::memcpy(&v, base() + i * 4, 4);
    return v;
  }
  std::uint16_t bits(std::int64_t i) const {
    std::uint16_t b;
    std::memcpy(&b, base() + i * 2, 2);
    return b;
  }
  void set_i32(std::int64_t i, std::int32_t v) { std::memcpy(base() + i * 4, &v, 4); }
  // Fills with uniform values in [-1, 1); returns the stored values.
  std::vector<float> fill_random(std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> out(static_cast<std::size_t>(numel_));
    for (std::int64_t i = 0; i < numel_; ++i) out[i] = set(i, dist(rng));
    return out;
  }
  std::vector<float> values() const {
    std::vector<float> out(static_cast<std::size_t>(numel_));
    for (std::int64_t i = 0; i < numel_; ++i) out[i] = get(i);
    return out;
  }
  DLTensor& raw() { return t_; }

 private:
  char* base() const { return const_cast<char*>(bytes_.data()) + t_.byte_offset; }
  std::vector<std::int64_t> shape_;
  std::int64_t numel_ = 0;
  std::vector<char> bytes_;
  DLTensor t_{};
};

// Naive references, in double.
inline std::vector<double> reference_gemm_nt(const std::vector<float>& a, const std::vector<float>& b, std::int64_t m,
                                             std::int64_t n, std::int64_t k) {
  std::vector<double> out(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) acc += double(a[i * k + p]) * double(b[j * k + p]);
      out[i * n + j] = acc;
    }
  return out;
}

// Tolerance of an f32 dot product of length k with |values| <= 1.
inline double dot_tolerance(std::int64_t k) { return 1e-6 * double(k) + 1e-6; }

// Every test process shares one module workspace under the build tree, so that modules are
// built once for the whole suite (concurrent test processes serialise on the cache's lock).
class SharedWorkspace : public ::testing::Environment {
 public:
  void SetUp() override {
    base_ = std::make_unique<config::ScopedOverride>(config::Var::MATE_WORKSPACE_BASE, MATE_OPS_TEST_WORKSPACE);
  }
  void TearDown() override { base_.reset(); }

 private:
  std::unique_ptr<config::ScopedOverride> base_;
};

// A private, empty module workspace for one test (instead of the shared one), so that a test can
// see a module go from missing to built. Kept symbols are forgotten on entry and exit.
class PrivateWorkspace {
 public:
  PrivateWorkspace() : base_(config::Var::MATE_WORKSPACE_BASE, dir_.path) { detail::forget_kernel_symbols(); }
  ~PrivateWorkspace() { detail::forget_kernel_symbols(); }
  PrivateWorkspace(const PrivateWorkspace&) = delete;
  PrivateWorkspace& operator=(const PrivateWorkspace&) = delete;

 private:
  // Declared in this order: the override ends before the directory is removed.
  ::mate::testing::TempDir dir_{"mate_ops_ws"};
  config::ScopedOverride base_;
};

// Registered once per test program (an inline variable is one object across its files).
inline ::testing::Environment* const g_shared_workspace = ::testing::AddGlobalTestEnvironment(new SharedWorkspace);

}  // namespace mate::ops::testing
