// A fixed number of logged calls, for counting the instructions one costs (instructions_per_call.sh
// runs this under callgrind): the call of bench_log_records.cpp (MATE_API over two 16x16 f32
// tensors and a float), at the level given, logged to /dev/null or to the file named.
//
//   log_calls LEVEL CALLS [DESTINATION]
//
// Instruction counts do not move with the VM's neighbours, where the timed benchmarks move by
// tens of percent: they show what a change to the logging path removed, if not what it saves
// in time (stalls, the system call, the cache).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mate/config.hpp"
#include "mate/log/api.hpp"

namespace {

__attribute__((noinline)) float scaled_sum(const DLTensor* a, const DLTensor* b, float alpha) {
  return MATE_API("bench.scaled_sum", a, b, alpha).run([&] {
    return alpha * (static_cast<const float*>(a->data)[0] + static_cast<const float*>(b->data)[0]);
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: log_calls LEVEL CALLS [DESTINATION]\n");
    return 2;
  }
  const int calls = std::atoi(argv[2]);
  std::vector<float> data_a(256, 1.5f), data_b(256, 1.5f);
  std::int64_t shape[2] = {16, 16};
  DLTensor a{}, b{};
  for (DLTensor* t : {&a, &b}) {
    t->device = {kDLCPU, 0};
    t->ndim = 2;
    t->dtype = {kDLFloat, 32, 1};
    t->shape = shape;
  }
  a.data = data_a.data();
  b.data = data_b.data();
  const mate::config::ScopedOverride level(mate::config::Var::MATE_LOGLEVEL, argv[1]);
  const mate::config::ScopedOverride dest(mate::config::Var::MATE_LOGDEST, argc == 4 ? argv[3] : "/dev/null");
  mate::log::reconfigure();
  float sum = 0;
  // Warm: the configuration read, first-use initializations, lazy binding.
  for (int i = 0; i < 100; ++i) sum += scaled_sum(&a, &b, 0.5f);
  for (int i = 0; i < calls; ++i) sum += scaled_sum(&a, &b, 0.5f);
  return sum > 0 ? 0 : 1;
}
