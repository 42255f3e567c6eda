// A program built against the CUDA toolkit's runtime (cuda_runtime.h, linked with libcudart),
// as a user's program is: under `mate guard-run` its cudaMalloc/cudaFree calls bind to the
// preload library's definitions (LD_PRELOAD comes first), so the allocations are guarded even
// though the executable names libcudart. Built only when the toolkit is installed.
//   cudart_alloc_child <ok|overflow>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* a = nullptr;
  void* b = nullptr;
  cudaError_t e = cudaMalloc(&a, 1000);
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc: %d\n", static_cast<int>(e));
    return 4;
  }
  if (cudaMalloc(&b, 3000) != cudaSuccess) return 4;
  // The fake driver's device memory is host memory: host code stands in for a kernel.
  std::memset(a, 1, 1000);
  std::memset(b, 2, 3000);
  if (std::strcmp(argv[1], "overflow") == 0) static_cast<char*>(b)[3072] = 1;  // past the 256-aligned end
  if (cudaFree(a) != cudaSuccess || cudaFree(b) != cudaSuccess) return 5;
  std::printf("done\n");
  return 0;
}
