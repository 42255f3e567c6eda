// Runs two instrumented kernel calls. With MATE_LOGLEVEL=10 their inputs and outputs are dumped,
// and `mate replay` runs them again (see docs/dumps-and-replay.md):
//
//   MATE_LOGLEVEL=10 MATE_DUMP_DIR=/tmp/dumps build/default/examples/replay_demo
//   build/default/bin/mate replay --dir /tmp/dumps --lib build/default/examples/libmate_example_kernels.so
#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace example {
void scale_add(const DLTensor* x, const DLTensor* y, DLTensor* out, float alpha);
void relu_(DLTensor* x);
}  // namespace example

int main() {
  std::vector<float> x{-2, -1, 0, 1, 2, 3, 4, 5}, y{1, 1, 1, 1}, out(4);
  std::int64_t four = 4, every_other = 2;
  DLTensor tx{x.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &four, &every_other, 0};  // x[0], x[2], ...
  DLTensor ty{y.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &four, nullptr, 0};
  DLTensor to{out.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &four, nullptr, 0};
  example::scale_add(&tx, &ty, &to, 0.5f);
  example::relu_(&to);
  std::printf("%g %g %g %g\n", out[0], out[1], out[2], out[3]);
  return 0;
}
