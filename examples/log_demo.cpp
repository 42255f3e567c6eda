// log_demo — a tiny "kernel library" whose API functions carry MATE's logging instrumentation.
//
//   MATE_LOGLEVEL=3 ./log_demo            (levels 0, 1, 3, 5; MATE_LOGFORMAT=json for tools)
//
// docs/logging.md shows this program's output at each level; a test (log.doc_samples) runs it
// and fails when the samples and the program disagree.
#include <sys/mman.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "mate/log/api.hpp"

namespace demo {

using mate::tensor::TensorView;

enum class Activation { Relu, Gelu };
std::string_view to_string(Activation a) { return a == Activation::Relu ? "Relu" : "Gelu"; }

// out[m, n] = alpha * sum_k a[m, k] * b[k, n]; returns the sum of out (a checksum).
float gemm(const DLTensor* a, const DLTensor* b, DLTensor* out, float alpha) {
  return MATE_API("gemm", a, b, out, alpha).outputs(MATE_ARGS(out)).run([&] {
    const std::int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    if (b->shape[0] != k) {
      throw std::invalid_argument("gemm: a is " + std::to_string(m) + "x" + std::to_string(k) +
                                  " but b has " + std::to_string(b->shape[0]) + " rows");
    }
    const auto* pa = static_cast<const float*>(a->data);
    const auto* pb = static_cast<const float*>(b->data);
    auto* po = static_cast<float*>(out->data);
    float sum = 0;
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (std::int64_t p = 0; p < k; ++p) acc += pa[i * k + p] * pb[p * n + j];
        po[i * n + j] = alpha * acc;
        sum += alpha * acc;
      }
    }
    return sum;
  });
}

// A class API: the scope form, logged as "Attention.run".
class Attention {
 public:
  void run(TensorView q, const std::vector<const DLTensor*>& kv, std::optional<float> scale,
           Activation activation, const std::string& backend, DLTensor* out) {
    MATE_API_SCOPE("Attention.run", q, kv, scale, activation, backend, out);
    MATE_API_OUTPUTS(out);
    auto* po = static_cast<float*>(out->data);
    for (std::int64_t i = 0; i < out->shape[0]; ++i) po[i] = static_cast<float>(i) * scale.value_or(1.0f);
  }
};

}  // namespace demo

namespace {

// Tensors live in one arena, placed at a fixed address when the system allows, so the VA
// ranges in docs/logging.md are the ones the program prints.
constexpr std::uintptr_t kArenaHint = 0x7e5a00000000;
constexpr std::size_t kArenaBytes = 1 << 16;

struct Arena {
  unsigned char* base = nullptr;
  std::size_t used = 0;
  void* take(std::size_t bytes) {
    void* p = base + used;
    used += (bytes + 255) / 256 * 256;
    return p;
  }
};

struct Tensor {
  std::vector<std::int64_t> shape, strides;
  DLTensor dl{};
  Tensor(void* data, DLDevice device, mate::tensor::ScalarType type, std::vector<std::int64_t> shp,
         std::vector<std::int64_t> str = {}, std::uint64_t byte_offset = 0)
      : shape(std::move(shp)), strides(std::move(str)) {
    dl.data = data;
    dl.device = device;
    dl.dtype = mate::tensor::dl_dtype(type);
    dl.ndim = static_cast<int>(shape.size());
    dl.shape = shape.data();
    dl.strides = strides.empty() ? nullptr : strides.data();
    dl.byte_offset = byte_offset;
  }
};

}  // namespace

int main() {
  using mate::tensor::ScalarType;
  void* mem = ::mmap(reinterpret_cast<void*>(kArenaHint), kArenaBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  Arena arena{static_cast<unsigned char*>(mem)};
  std::fprintf(stderr, "arena %p %zu\n", mem, kArenaBytes);
  const DLDevice cpu{kDLCPU, 0};

  // gemm on contiguous f32 tensors.
  auto* a_data = static_cast<float*>(arena.take(4 * 8 * sizeof(float)));
  auto* b_data = static_cast<float*>(arena.take(8 * 3 * sizeof(float)));
  auto* c_data = static_cast<float*>(arena.take(4 * 3 * sizeof(float)));
  for (int i = 0; i < 32; ++i) a_data[i] = static_cast<float>(i % 7) - 3.0f;
  for (int i = 0; i < 24; ++i) b_data[i] = 0.25f * static_cast<float>(i % 5);
  Tensor a(a_data, cpu, ScalarType::F32, {4, 8});
  Tensor b(b_data, cpu, ScalarType::F32, {8, 3});
  Tensor c(c_data, cpu, ScalarType::F32, {4, 3});
  demo::gemm(&a.dl, &b.dl, &c.dl, 0.5f);

  // Attention.run: a bf16 query with a NaN and an Inf, a transposed (non-contiguous) f16 key,
  // an i32 tensor walked backwards (negative stride), and a tensor in CUDA memory.
  auto* q_data = static_cast<std::uint16_t*>(arena.take(2 * 4 * 2));
  const std::uint16_t q_values[8] = {0x3f80, 0xbf00, 0x4000, 0x7fc0, 0x3e80, 0x7f80, 0xc040, 0x0000};
  std::memcpy(q_data, q_values, sizeof q_values);
  auto* k_data = static_cast<std::uint16_t*>(arena.take(4 * 2 * 2));
  const std::uint16_t k_values[8] = {0x3c00, 0x4000, 0x4200, 0x4400, 0xbc00, 0xc000, 0xc200, 0xc400};
  std::memcpy(k_data, k_values, sizeof k_values);
  auto* idx_data = static_cast<std::int32_t*>(arena.take(3 * 4));
  for (int i = 0; i < 3; ++i) idx_data[i] = 10 * (i + 1);
  auto* o_data = static_cast<float*>(arena.take(2 * 4));
  Tensor q(q_data, cpu, ScalarType::BF16, {2, 4});
  Tensor k_t(k_data, cpu, ScalarType::F16, {2, 4}, {1, 2});  // the transpose of a 4x2 tensor
  Tensor idx(idx_data, cpu, ScalarType::I32, {3}, {-1}, 2 * sizeof(std::int32_t));
  Tensor v_dev(reinterpret_cast<void*>(0x7f1200000000), {kDLCUDA, 0}, ScalarType::F16, {2, 4});
  Tensor out(o_data, cpu, ScalarType::F32, {2});
  demo::Attention attention;
  attention.run(mate::tensor::TensorView(q.dl), {&k_t.dl, &idx.dl, &v_dev.dl}, 0.125f,
                demo::Activation::Gelu, "fa2", &out.dl);

  // An exception: logged with its message, then seen by the caller.
  Tensor bad(b_data, cpu, ScalarType::F32, {5, 3});
  try {
    demo::gemm(&a.dl, &bad.dl, &c.dl, 1.0f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "caught: %s\n", e.what());
  }
  return 0;
}
