// A program built against the CUDA runtime the way users' programs are (-cudart shared, so that
// `mate guard-run`'s preload can interpose cudaMalloc/cudaFree; the static runtime cannot be),
// for tests/gpu/device_check.sh:
//   cudart_write_past tail     one float past the end of a 1024-byte cudaMalloc buffer
//   cudart_write_past head     one float before its start
//   cudart_write_past clean N  N rounds of cudaMalloc, in-bounds kernels, checks and cudaFree
// Each fault runs in its own process: CUDA_ERROR_ILLEGAL_ADDRESS (700) is sticky.
// It prints the buffer's range and the address written, so the caller can find the allocation
// in `mate guard-run --log-allocations` output. Exit: 0 the fault was reported (tail/head) or
// every round checked out (clean); 1 the write went unnoticed or a value was wrong; 2 usage or
// setup error; 77 no CUDA device.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

__global__ void store_one(float* data, long index, float value) { data[index] = value; }

__global__ void fill(float* data, long n, float base) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x)
    data[i] = base + static_cast<float>(i);
}

int setup_error(const char* what, cudaError_t e) {
  std::fprintf(stderr, "cudart_write_past: %s: %s (%s, %d)\n", what, cudaGetErrorString(e),
               cudaGetErrorName(e), static_cast<int>(e));
  return 2;
}

int one_fault(bool tail) {
  constexpr long kElements = 256;  // 1024 bytes: a multiple of 256, cudaMalloc's alignment
  float* buffer = nullptr;
  if (cudaError_t e = cudaMalloc(&buffer, kElements * sizeof(float)); e != cudaSuccess)
    return setup_error("cudaMalloc", e);
  const auto begin = reinterpret_cast<unsigned long long>(buffer);
  std::printf("buffer [0x%llx, 0x%llx) %zu bytes\n", begin, begin + kElements * sizeof(float),
              kElements * sizeof(float));
  // In bounds first: the kernel and the buffer work.
  store_one<<<1, 1>>>(buffer, tail ? kElements - 1 : 0, 1.0f);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return setup_error("in-bounds store", e);

  const long index = tail ? kElements : -1;
  std::printf("writing %s at 0x%llx\n", tail ? "one float past the end" : "one float before the start",
              begin + index * static_cast<long long>(sizeof(float)));
  std::fflush(stdout);
  store_one<<<1, 1>>>(buffer, index, 2.0f);
  cudaError_t launch = cudaGetLastError();
  cudaError_t sync = cudaDeviceSynchronize();
  std::printf("launch: %s; cudaDeviceSynchronize: %s (%d)\n", cudaGetErrorName(launch),
              cudaGetErrorName(sync), static_cast<int>(sync));
  std::fflush(stdout);
  cudaError_t freed = cudaFree(buffer);
  std::printf("cudaFree: %s (%d)\n", cudaGetErrorName(freed), static_cast<int>(freed));
  const bool reported = sync == cudaErrorIllegalAddress || freed == cudaErrorIllegalAddress;
  std::printf("%s\n", reported ? "the write was reported as an illegal address"
                               : "the write went unnoticed");
  return reported ? 0 : 1;
}

// Seconds since `t0` (steady clock), for the clean workload's phases.
double since(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int clean(long rounds) {
  double checksum = 0;
  // Where the time goes (under a guard, which phase pays): cudaMalloc, kernel launches, the
  // copies back (which wait for the kernels), cudaFree.
  double t_malloc = 0, t_launch = 0, t_copy = 0, t_free = 0;
  for (long r = 0; r < rounds; ++r) {
    float* buffers[4] = {};
    long sizes[4];
    for (int b = 0; b < 4; ++b) {
      sizes[b] = 64 * (1 + (r * 4 + b) % 97);  // 256 bytes to ~25 KB, multiples of 256 bytes
      auto t0 = std::chrono::steady_clock::now();
      if (cudaError_t e = cudaMalloc(&buffers[b], sizes[b] * sizeof(float)); e != cudaSuccess)
        return setup_error("cudaMalloc", e);
      t_malloc += since(t0);
      t0 = std::chrono::steady_clock::now();
      fill<<<8, 128>>>(buffers[b], sizes[b], static_cast<float>(b));
      t_launch += since(t0);
    }
    for (int b = 0; b < 4; ++b) {
      float last = 0;
      auto t0 = std::chrono::steady_clock::now();
      if (cudaError_t e = cudaMemcpy(&last, buffers[b] + sizes[b] - 1, sizeof last, cudaMemcpyDeviceToHost);
          e != cudaSuccess)
        return setup_error("cudaMemcpy", e);
      t_copy += since(t0);
      if (last != static_cast<float>(b) + static_cast<float>(sizes[b] - 1)) {
        std::fprintf(stderr, "cudart_write_past: round %ld buffer %d: read %g, expected %g\n", r, b,
                     last, static_cast<float>(b) + static_cast<float>(sizes[b] - 1));
        return 1;
      }
      checksum += last;
      t0 = std::chrono::steady_clock::now();
      if (cudaError_t e = cudaFree(buffers[b]); e != cudaSuccess) return setup_error("cudaFree", e);
      t_free += since(t0);
    }
  }
  std::printf("clean: %ld rounds, 4 buffers each, checksum %.0f\n", rounds, checksum);
  std::printf("clean: seconds in cudaMalloc %.3f, launches %.3f, copies back %.3f, cudaFree %.3f\n", t_malloc,
              t_launch, t_copy, t_free);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  const bool fault = std::strcmp(mode, "tail") == 0 || std::strcmp(mode, "head") == 0;
  long rounds = 100;
  if (std::strcmp(mode, "clean") == 0 && argc > 2) {
    char* end = nullptr;
    rounds = std::strtol(argv[2], &end, 10);
    if (*end != '\0' || rounds < 1) {
      std::fprintf(stderr, "cudart_write_past: rounds '%s' is not a positive integer\n", argv[2]);
      return 2;
    }
  } else if (!fault && std::strcmp(mode, "clean") != 0) {
    std::fprintf(stderr, "usage: cudart_write_past tail | head | clean [ROUNDS]  (got '%s')\n", mode);
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  return fault ? one_fault(std::strcmp(mode, "tail") == 0) : clean(rounds);
}
