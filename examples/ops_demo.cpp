// ops_demo: a few calls into MATE's reference kernel library (mate::ops), as an application
// would make them: a GEMM in f32 and bf16, an RMSNorm, and a DeepGEMM-style grouped GEMM over
// padded expert segments. Each result is checked against a naive loop.
//
//   build/default/examples/ops_demo                      # first run builds the modules, then cache hits
//   MATE_LOGLEVEL=3 build/default/examples/ops_demo      # the calls, their inputs and outputs
//   MATE_LOGLEVEL=10 build/default/examples/ops_demo     # plus dumps (with the dump component)
//
// Exit status: 0 when every result matches, 1 otherwise.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "mate/jit/module.hpp"
#include "mate/ops/contiguous_layout.hpp"
#include "mate/ops/modules.hpp"
#include "mate/ops/ops.hpp"

namespace {

// A host tensor owning its bytes.
struct Tensor {
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
  DLTensor dl{};
  Tensor(std::vector<std::int64_t> s, DLDataType dtype) : shape(std::move(s)) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    bytes.assign(static_cast<std::size_t>(n) * dtype.bits / 8, 0);
    dl = DLTensor{bytes.data(), {kDLCPU, 0}, static_cast<int>(shape.size()), dtype, shape.data(), nullptr, 0};
  }
  Tensor(const Tensor&) = delete;
  std::int64_t numel() const { return static_cast<std::int64_t>(bytes.size()) * 8 / dl.dtype.bits; }
  bool bf16() const { return dl.dtype.code == kDLBfloat; }
  float get(std::int64_t i) const {
    if (bf16()) {
      std::uint32_t u = static_cast<std::uint32_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8)) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    float f;
    std::memcpy(&f, &bytes[4 * i], 4);
    return f;
  }
  void set(std::int64_t i, float v) {
    if (bf16()) {
      std::uint32_t u;
      std::memcpy(&u, &v, 4);
      u += 0x7fffu + ((u >> 16) & 1u);
      bytes[2 * i] = static_cast<std::uint8_t>(u >> 16);
      bytes[2 * i + 1] = static_cast<std::uint8_t>(u >> 24);
    } else {
      std::memcpy(&bytes[4 * i], &v, 4);
    }
  }
  void random(std::mt19937& rng) {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (std::int64_t i = 0; i < numel(); ++i) set(i, d(rng));
  }
};

constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr DLDataType kBF16{kDLBfloat, 16, 1};
constexpr DLDataType kI32{kDLInt, 32, 1};

bool g_ok = true;

// Where the call's module came from, asked after the call: load_module() hands back the module
// the call loaded (kept in memory), and its origin says whether this call built it, found it in
// the JIT cache, or used an AOT build.
std::string module_origin(mate::ops::Kernel kernel, mate::ops::InputType type) {
  mate::jit::Module m = mate::jit::load_module(mate::ops::module_spec(kernel, type, mate::jit::Toolchain::Host));
  const char* where = "?";
  switch (m.origin()) {
    case mate::jit::Origin::Aot: where = "AOT"; break;
    case mate::jit::Origin::JitCache: where = "JIT cache"; break;
    case mate::jit::Origin::JitBuilt: where = "built now"; break;
  }
  return m.name() + ": " + where;
}

void report(const char* what, const std::string& module, double max_error, double tolerance, double ms) {
  bool ok = max_error <= tolerance;
  g_ok = g_ok && ok;
  std::printf("  %-44s %8.1f ms  max |error| %.1e %-8s [%s]\n", what, ms, max_error, ok ? "ok" : "MISMATCH",
              module.c_str());
}

template <class F>
double timed_ms(F&& f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

double gemm_error(const Tensor& a, const Tensor& b, const Tensor& out, float alpha) {
  std::int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
  double worst = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) acc += double(a.get(i * k + p)) * b.get(j * k + p);
      worst = std::max(worst, std::abs(alpha * acc - out.get(i * n + j)));
    }
  return worst;
}

}  // namespace

int main() try {
  std::mt19937 rng(2026);
  std::printf("MATE reference kernels (mate::ops) on the host, checked against naive loops\n");

  Tensor a({64, 128}, kF32), b({96, 128}, kF32), out({64, 96}, kF32);
  a.random(rng);
  b.random(rng);
  double ms = timed_ms([&] { mate::ops::gemm_nt(&a.dl, &b.dl, &out.dl, 0.5f); });
  auto module = module_origin(mate::ops::Kernel::GemmNt, mate::ops::InputType::F32);
  report("gemm_nt f32 [64,128] x [96,128]^T", module, gemm_error(a, b, out, 0.5f), 1e-4, ms);

  Tensor ab({33, 256}, kBF16), bb({40, 256}, kBF16), outb({33, 40}, kF32);
  ab.random(rng);
  bb.random(rng);
  ms = timed_ms([&] { mate::ops::gemm_nt(&ab.dl, &bb.dl, &outb.dl); });
  module = module_origin(mate::ops::Kernel::GemmNt, mate::ops::InputType::BF16);
  report("gemm_nt bf16 [33,256] x [40,256]^T", module, gemm_error(ab, bb, outb, 1.0f), 1e-4, ms);

  Tensor x({8, 512}, kBF16), w({512}, kBF16), y({8, 512}, kBF16);
  x.random(rng);
  w.random(rng);
  ms = timed_ms([&] { mate::ops::rmsnorm(&x.dl, &w.dl, &y.dl, 1e-6f); });
  module = module_origin(mate::ops::Kernel::RmsNorm, mate::ops::InputType::BF16);
  double worst = 0;
  for (std::int64_t r = 0; r < 8; ++r) {
    double ss = 0;
    for (std::int64_t i = 0; i < 512; ++i) ss += double(x.get(r * 512 + i)) * x.get(r * 512 + i);
    double inv = 1 / std::sqrt(ss / 512 + 1e-6);
    for (std::int64_t i = 0; i < 512; ++i) {
      double ref = x.get(r * 512 + i) * inv * w.get(i);
      worst = std::max(worst, std::abs(ref - y.get(r * 512 + i)) / (std::abs(ref) + 1e-3));
    }
  }
  report("rmsnorm bf16 [8,512] (relative error)", module, worst, 1.0 / 128, ms);

  // Three experts with 100, 0 and 150 tokens, padded to the M alignment.
  std::vector<std::int64_t> tokens{100, 0, 150};
  auto layout = mate::ops::make_contiguous_layout(tokens);
  std::int64_t n = 64, k = 32, m_sum = layout.m_sum;
  Tensor lhs({m_sum, k}, kBF16), rhs({3, n, k}, kBF16), gout({m_sum, n}, kF32), idx({m_sum}, kI32);
  lhs.random(rng);
  rhs.random(rng);
  std::memcpy(idx.bytes.data(), layout.m_indices.data(), layout.m_indices.size() * 4);
  ms = timed_ms([&] { mate::ops::m_grouped_gemm_nt_contiguous(&lhs.dl, &rhs.dl, &gout.dl, &idx.dl); });
  module = module_origin(mate::ops::Kernel::GroupedGemmNt, mate::ops::InputType::BF16);
  worst = 0;
  for (std::int64_t r = 0; r < m_sum; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      int g = layout.m_indices[r];
      for (std::int64_t p = 0; g >= 0 && p < k; ++p) acc += double(lhs.get(r * k + p)) * rhs.get((g * n + j) * k + p);
      worst = std::max(worst, std::abs(acc - gout.get(r * n + j)));
    }
  char what[96];
  std::snprintf(what, sizeof what, "grouped gemm bf16 m_sum %lld (alignment %d)", static_cast<long long>(m_sum),
                mate::ops::get_mk_alignment_for_contiguous_layout());
  report(what, module, worst, 1e-4, ms);

  std::printf("%s\n", g_ok ? "all results match" : "MISMATCH: see above");
  return g_ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ops_demo: error: %s\n", e.what());
  return 1;
}
