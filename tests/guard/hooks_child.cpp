// Child process for the pluggable-allocator test: loads libmate_guard_hooks.so the way
// torch.cuda.memory.CUDAPluggableAllocator does (dlopen + dlsym by name) and uses it.
//   hooks_child <library> <ok|overflow|double_free|device1|device1_overflow> [FAKE_DRIVER]
// device1 and device1_overflow allocate on ordinal 1 (run with FAKE_DRIVER_DEVICE_COUNT=2); the
// others on 0, after checking that ordinal 1 is refused (the fake has one device by default).
// With FAKE_DRIVER (the fake driver library MATE loaded), prints which device's memory the
// allocation is ("device N") and how many references device 0's context has then.
#include <dlfcn.h>
#include <sys/types.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  using Alloc = void* (*)(ssize_t, int, void*);
  using Free = void (*)(void*, ssize_t, int, void*);
  auto alloc = reinterpret_cast<Alloc>(dlsym(lib, "mate_guard_alloc"));
  auto release = reinterpret_cast<Free>(dlsym(lib, "mate_guard_free"));
  if (alloc == nullptr || release == nullptr) return 4;
  const char* what = argv[2];
  const int device = std::strncmp(what, "device1", 7) == 0 ? 1 : 0;
  if (device == 0 && alloc(16, 1, nullptr) != nullptr) return 5;  // device 1: refused
  if (alloc(16, -1, nullptr) != nullptr) return 7;                 // never an ordinal
  auto* p = static_cast<unsigned char*>(alloc(1000, device, nullptr));
  if (p == nullptr) return 6;
  std::printf("ptr %p\n", static_cast<void*>(p));
  if (argc == 4) {
    void* fake = dlopen(argv[3], RTLD_NOW | RTLD_NOLOAD);
    using DeviceOf = int (*)(unsigned long long);
    auto device_of = fake != nullptr ? reinterpret_cast<DeviceOf>(dlsym(fake, "fake_driver_device_of")) : nullptr;
    if (device_of == nullptr) return 8;
    std::printf("device %d\n", device_of(reinterpret_cast<unsigned long long>(p)));
    using ContextRefs = int (*)(int);
    auto context_refs = reinterpret_cast<ContextRefs>(dlsym(fake, "fake_driver_context_refs"));
    if (context_refs == nullptr) return 8;
    std::printf("device 0 contexts: %d\n", context_refs(0));
  }
  std::fflush(stdout);
  std::memset(p, 7, 1000);  // the "kernel" writes the whole tensor
  if (std::strcmp(what, "overflow") == 0 || std::strcmp(what, "device1_overflow") == 0) p[1024] = 1;  // past the 256-aligned end: guard
  release(p, 1000, device, nullptr);
  if (std::strcmp(what, "double_free") == 0) release(p, 1000, device, nullptr);
  if (std::strcmp(what, "device1") == 0) {  // device 0 after device 1: its guard still starts
    void* q = alloc(100, 0, nullptr);
    if (q == nullptr) return 9;
    release(q, 100, 0, nullptr);
  }
  std::printf("done\n");
  return 0;
}
