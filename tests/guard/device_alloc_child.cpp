// A program that allocates device memory through the plain runtime and driver entry points, as
// a framework without a pluggable hook does. It resolves them at run time (no toolkit needed):
// under `mate guard-run` they are the preload library's.
//   device_alloc_child <ok|overflow>
//   device_alloc_child init-first DRIVER
// init-first: calls cuInit of the driver library DRIVER itself before allocating (as libcudart
// does in its first call); then as ok.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  const bool init_first = argc == 3 && std::strcmp(argv[1], "init-first") == 0;
  if (argc != 2 && !init_first) return 2;
  if (init_first) {
    void* driver = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    using Init = int (*)(unsigned);
    auto cu_init = driver != nullptr ? reinterpret_cast<Init>(dlsym(driver, "cuInit")) : nullptr;
    if (cu_init == nullptr || cu_init(0) != 0) {
      std::fprintf(stderr, "cuInit of %s failed\n", argv[2]);
      return 6;
    }
  }
  using DriverAlloc = int (*)(unsigned long long*, std::size_t);
  using DriverFree = int (*)(unsigned long long);
  using RuntimeAlloc = int (*)(void**, std::size_t);
  using RuntimeFree = int (*)(void*);
  auto cu_alloc = reinterpret_cast<DriverAlloc>(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  auto cu_free = reinterpret_cast<DriverFree>(dlsym(RTLD_DEFAULT, "cuMemFree_v2"));
  auto cuda_malloc = reinterpret_cast<RuntimeAlloc>(dlsym(RTLD_DEFAULT, "cudaMalloc"));
  auto cuda_free = reinterpret_cast<RuntimeFree>(dlsym(RTLD_DEFAULT, "cudaFree"));
  if (!cu_alloc || !cu_free || !cuda_malloc || !cuda_free) {
    std::fprintf(stderr, "no device allocation entry points\n");
    return 3;
  }
  unsigned long long d = 0;
  void* r = nullptr;
  if (cu_alloc(&d, 1000) != 0 || cuda_malloc(&r, 500) != 0) return 4;
  std::memset(reinterpret_cast<void*>(d), 1, 1000);  // the "kernel"
  std::memset(r, 2, 500);
  if (std::strcmp(argv[1], "overflow") == 0) reinterpret_cast<char*>(d)[1024] = 1;
  if (cu_free(d) != 0 || cuda_free(r) != 0) return 5;
  std::printf("done\n");
  return 0;
}
