// The device runtime's and driver's plain allocation entry points, interposed by the preload
// library of `mate guard-run`: cudaMalloc/cudaFree, cudaMallocAsync/cudaFreeAsync,
// cuMemAlloc_v2/cuMemFree_v2 and the MUSA names. The first device allocation installs the
// process-wide guarded allocator on the driver MATE_DEVICE_DRIVER selects (device 0), with the
// mode and flags `mate guard-run` was given. Anything the guard does not serve (no driver, a
// pointer it did not return, the other vendor's calls) goes to the next definition (RTLD_NEXT).
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "mate/device/driver.hpp"
#include "mate/guard/allocator.hpp"
#include "guard/preload/preload_state.hpp"

namespace {

using mate::device::Kind;
using mate::guard::GuardAllocator;
using mate::guard::preload::Inside;
using mate::guard::preload::inside_flag;

// Result codes the CUDA and MUSA APIs share.
constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kOutOfMemory = 2;
constexpr int kNotInitialized = 3;
constexpr int kCaptureUnsupported = 900;

GuardAllocator* device_guard(Kind kind) noexcept {
  static std::once_flag once;
  static GuardAllocator* guard = nullptr;
  if (inside_flag()) return nullptr;
  std::call_once(once, [] {
    const mate::guard::GuardAllocatorConfig* bootstrap = mate::guard::preload::bootstrap_config();
    if (bootstrap == nullptr) return;
    Inside inside;
    try {
      std::string reason;
      mate::device::DriverBackend* selected = mate::device::driver_backend(&reason);
      if (selected == nullptr) {
        std::fprintf(stderr, "mate guard-run: device allocations are not guarded: %s\n", reason.c_str());
        return;
      }
      mate::guard::GuardAllocatorConfig config = *bootstrap;
      config.backend = selected->kind();
      config.map_entry_limit = 0;  // device mappings take no host memory-map entries
      guard = &mate::guard::install_guard_allocator(config);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mate guard-run: device allocations are not guarded: %s\n", e.what());
    }
  });
  return guard != nullptr && guard->backend().kind() == kind ? guard : nullptr;
}

template <class Fn>
Fn next(const char* name) noexcept {
  Inside inside;
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// Returns true when the guard served the allocation (result in *code).
bool guarded_alloc(Kind kind, std::uintptr_t* out, std::size_t bytes, void* stream, int* code) noexcept {
  GuardAllocator* guard = device_guard(kind);
  if (guard == nullptr) return false;
  Inside inside;
  auto r = guard->allocate(bytes, 0, stream);
  if (r) {
    *out = r.ptr;
    *code = kSuccess;
  } else {
    std::fprintf(stderr, "mate guard-run: %s (size %zu)\n", r.message, bytes);
    *code = r.error == mate::guard::AllocError::Capturing ? kCaptureUnsupported : kOutOfMemory;
  }
  return true;
}

bool guarded_free(Kind kind, std::uintptr_t ptr, void* stream, int* code) noexcept {
  GuardAllocator* guard = device_guard(kind);
  if (guard == nullptr || ptr == 0) return false;
  Inside inside;
  if (!guard->owns(ptr)) return false;
  auto result = guard->deallocate(ptr, stream);
  // CanaryNotChecked: the memory was freed; the unreadable canary is already reported.
  *code = result == mate::guard::FreeResult::Capturing ? kCaptureUnsupported
          : result == mate::guard::FreeResult::Ok || result == mate::guard::FreeResult::CanaryNotChecked
              ? kSuccess
              : kInvalidValue;
  return true;
}

}  // namespace

#define MATE_EXPORT extern "C" __attribute__((visibility("default")))

// Driver API: CUresult cuMemAlloc_v2(CUdeviceptr*, size_t), CUresult cuMemFree_v2(CUdeviceptr).
#define MATE_DRIVER_PAIR(alloc_name, free_name, kind)                                          \
  MATE_EXPORT int alloc_name(unsigned long long* dptr, std::size_t bytes) {                   \
    std::uintptr_t p = 0;                                                                      \
    int code = kSuccess;                                                                       \
    if (guarded_alloc(kind, &p, bytes, nullptr, &code)) {                                      \
      if (code == kSuccess) *dptr = p;                                                         \
      return code;                                                                             \
    }                                                                                          \
    static auto real = next<int (*)(unsigned long long*, std::size_t)>(#alloc_name);           \
    return real != nullptr ? real(dptr, bytes) : kNotInitialized;                              \
  }                                                                                            \
  MATE_EXPORT int free_name(unsigned long long dptr) {                                         \
    int code = kSuccess;                                                                       \
    if (guarded_free(kind, static_cast<std::uintptr_t>(dptr), nullptr, &code)) return code;    \
    static auto real = next<int (*)(unsigned long long)>(#free_name);                          \
    return real != nullptr ? real(dptr) : kNotInitialized;                                     \
  }

// Runtime API: cudaError_t cudaMalloc(void**, size_t), cudaFree(void*), and the stream-ordered
// pair (the guard allocates at once; sync_on_free covers work still queued).
#define MATE_RUNTIME_PAIR(alloc_name, free_name, alloc_async, free_async, kind)                          \
  MATE_EXPORT int alloc_name(void** ptr, std::size_t bytes) {                                            \
    std::uintptr_t p = 0;                                                                                \
    int code = kSuccess;                                                                                 \
    if (guarded_alloc(kind, &p, bytes, nullptr, &code)) {                                                \
      if (code == kSuccess) *ptr = reinterpret_cast<void*>(p);                                           \
      return code;                                                                                       \
    }                                                                                                    \
    static auto real = next<int (*)(void**, std::size_t)>(#alloc_name);                                  \
    return real != nullptr ? real(ptr, bytes) : kNotInitialized;                                         \
  }                                                                                                      \
  MATE_EXPORT int free_name(void* ptr) {                                                                 \
    int code = kSuccess;                                                                                 \
    if (guarded_free(kind, reinterpret_cast<std::uintptr_t>(ptr), nullptr, &code)) return code;          \
    static auto real = next<int (*)(void*)>(#free_name);                                                 \
    return real != nullptr ? real(ptr) : kNotInitialized;                                                \
  }                                                                                                      \
  MATE_EXPORT int alloc_async(void** ptr, std::size_t bytes, void* stream) {                             \
    std::uintptr_t p = 0;                                                                                \
    int code = kSuccess;                                                                                 \
    if (guarded_alloc(kind, &p, bytes, stream, &code)) {                                                 \
      if (code == kSuccess) *ptr = reinterpret_cast<void*>(p);                                           \
      return code;                                                                                       \
    }                                                                                                    \
    static auto real = next<int (*)(void**, std::size_t, void*)>(#alloc_async);                          \
    return real != nullptr ? real(ptr, bytes, stream) : kNotInitialized;                                 \
  }                                                                                                      \
  MATE_EXPORT int free_async(void* ptr, void* stream) {                                                  \
    int code = kSuccess;                                                                                 \
    if (guarded_free(kind, reinterpret_cast<std::uintptr_t>(ptr), stream, &code)) return code;           \
    static auto real = next<int (*)(void*, void*)>(#free_async);                                         \
    return real != nullptr ? real(ptr, stream) : kNotInitialized;                                        \
  }

MATE_DRIVER_PAIR(cuMemAlloc_v2, cuMemFree_v2, Kind::Cuda)
MATE_DRIVER_PAIR(muMemAlloc, muMemFree, Kind::Musa)
MATE_RUNTIME_PAIR(cudaMalloc, cudaFree, cudaMallocAsync, cudaFreeAsync, Kind::Cuda)
MATE_RUNTIME_PAIR(musaMalloc, musaFree, musaMallocAsync, musaFreeAsync, Kind::Musa)
