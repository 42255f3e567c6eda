// A small kernel library made replayable: each API function has its MATE_API line (logging and
// level-10 dumps) and its MATE_REPLAYABLE line (so `mate replay` can run it again).
// Built twice: into replay_demo, and as libmate_example_kernels.so for `mate replay --lib`.
#include <dlpack/dlpack.h>

#include <algorithm>

#include "mate/log/api.hpp"
#include "mate/replay/registry.hpp"
#include "mate/tensor/tensor_view.hpp"

namespace example {

// out[i] = alpha * x[i] + y[i], 1-D f32 tensors of any stride.
void scale_add(const DLTensor* x, const DLTensor* y, DLTensor* out, float alpha) {
  MATE_API("example.scale_add", x, y, out, alpha).outputs(MATE_ARGS(out)).run([&] {
    mate::tensor::TensorView vx(*x), vy(*y), vo(*out);
    auto* px = reinterpret_cast<const float*>(vx.origin());
    auto* py = reinterpret_cast<const float*>(vy.origin());
    auto* po = reinterpret_cast<float*>(vo.origin());
    for (std::int64_t i = 0; i < vo.numel(); ++i) po[i * vo.stride(0)] = alpha * px[i * vx.stride(0)] + py[i * vy.stride(0)];
  });
}

// x = max(x, 0), in place.
void relu_(DLTensor* x) {
  MATE_API("example.relu_", x).outputs(MATE_ARGS(x)).run([&] {
    mate::tensor::TensorView v(*x);
    auto* p = reinterpret_cast<float*>(v.origin());
    for (std::int64_t i = 0; i < v.numel(); ++i) p[i * v.stride(0)] = std::max(p[i * v.stride(0)], 0.0f);
  });
}

}  // namespace example

MATE_REPLAYABLE("example.scale_add", &example::scale_add, "x", "y", "out", "alpha");
MATE_REPLAYABLE("example.relu_", &example::relu_);
