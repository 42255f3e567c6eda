// A program that allocates device memory through the plain runtime and driver entry points, as
// a framework without a pluggable hook does. It resolves them at run time (no toolkit needed):
// under `mate guard-run` they are the preload library's.
//   device_alloc_child <ok|overflow>
//   device_alloc_child init-first DRIVER
//   device_alloc_child device1 DRIVER
// init-first: calls cuInit of the driver library DRIVER itself before allocating (as libcudart
// does in its first call); then as ok. device1: also makes device 1's primary context current
// and the runtime's current device 1 (as cudaSetDevice(1) does), then as ok, and prints which
// device the fake driver placed each allocation on ("driver allocation on device N", "runtime
// ..."); then, device 0 current, allocates 700 bytes there and 300 stream-ordered on a stream of
// device 1, and frees device 1's first two blocks with device 0 current.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

// The runtime's current device, as libcudart's cudaGetDevice answers it (the executable exports
// it: under `mate guard-run` the preload asks it which device a cudaMalloc is for).
static int g_runtime_device = 0;
extern "C" __attribute__((visibility("default"))) int cudaGetDevice(int* device) {
  *device = g_runtime_device;
  return 0;
}

int main(int argc, char** argv) {
  const bool init_first = argc == 3 && std::strcmp(argv[1], "init-first") == 0;
  const bool device1 = argc == 3 && std::strcmp(argv[1], "device1") == 0;
  if (argc != 2 && !init_first && !device1) return 2;
  void* driver = nullptr;
  if (init_first || device1) {
    driver = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    using Init = int (*)(unsigned);
    auto cu_init = driver != nullptr ? reinterpret_cast<Init>(dlsym(driver, "cuInit")) : nullptr;
    if (cu_init == nullptr || cu_init(0) != 0) {
      std::fprintf(stderr, "cuInit of %s failed\n", argv[2]);
      return 6;
    }
  }
  if (device1) {
    using Retain = int (*)(void**, int);
    using SetCurrent = int (*)(void*);
    auto retain = reinterpret_cast<Retain>(dlsym(driver, "cuDevicePrimaryCtxRetain"));
    auto set_current = reinterpret_cast<SetCurrent>(dlsym(driver, "cuCtxSetCurrent"));
    void* ctx = nullptr;
    if (retain == nullptr || set_current == nullptr || retain(&ctx, 1) != 0 || set_current(ctx) != 0) {
      std::fprintf(stderr, "making device 1's context current failed\n");
      return 7;
    }
    g_runtime_device = 1;
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
  if (device1) {
    using DeviceOf = int (*)(unsigned long long);
    auto device_of = reinterpret_cast<DeviceOf>(dlsym(driver, "fake_driver_device_of"));
    if (device_of == nullptr) return 8;
    auto at = [](const void* p) { return reinterpret_cast<unsigned long long>(p); };
    std::printf("driver allocation on device %d\nruntime allocation on device %d\n", device_of(d), device_of(at(r)));
    // Nothing made a context on device 0 for the program's allocations on device 1.
    using ContextRefs = int (*)(int);
    auto context_refs = reinterpret_cast<ContextRefs>(dlsym(driver, "fake_driver_context_refs"));
    if (context_refs == nullptr) return 8;
    std::printf("device 0 contexts: %d\n", context_refs(0));
    // Then device 0 current (cudaSetDevice(0)): its guard starts after device 1's has mapped.
    using Retain = int (*)(void**, int);
    using SetCurrent = int (*)(void*);
    void* ctx0 = nullptr;
    if (reinterpret_cast<Retain>(dlsym(driver, "cuDevicePrimaryCtxRetain"))(&ctx0, 0) != 0 ||
        reinterpret_cast<SetCurrent>(dlsym(driver, "cuCtxSetCurrent"))(ctx0) != 0)
      return 9;
    g_runtime_device = 0;
    void* z = nullptr;
    if (cuda_malloc(&z, 700) != 0) return 10;
    std::printf("device 0 allocation on device %d\n", device_of(at(z)));
    // Stream-ordered, on a stream of device 1 while device 0 is current: the stream's device.
    using StreamOn = void* (*)(int);
    using AllocAsync = int (*)(void**, std::size_t, void*);
    using FreeAsync = int (*)(void*, void*);
    auto stream_on = reinterpret_cast<StreamOn>(dlsym(driver, "fake_driver_stream_on_device"));
    auto alloc_async = reinterpret_cast<AllocAsync>(dlsym(RTLD_DEFAULT, "cudaMallocAsync"));
    auto free_async = reinterpret_cast<FreeAsync>(dlsym(RTLD_DEFAULT, "cudaFreeAsync"));
    if (stream_on == nullptr || alloc_async == nullptr || free_async == nullptr) return 11;
    void* stream1 = stream_on(1);
    void* w = nullptr;
    if (alloc_async(&w, 300, stream1) != 0) return 12;
    std::printf("stream allocation on device %d\n", device_of(at(w)));
    if (free_async(w, stream1) != 0 || cuda_free(z) != 0) return 13;
    // d and r (device 1's) are freed below with device 0 current: freed by their own guard.
  }
  std::memset(reinterpret_cast<void*>(d), 1, 1000);  // the "kernel"
  std::memset(r, 2, 500);
  if (std::strcmp(argv[1], "overflow") == 0) reinterpret_cast<char*>(d)[1024] = 1;
  if (cu_free(d) != 0 || cuda_free(r) != 0) return 5;
  std::printf("done\n");
  return 0;
}
