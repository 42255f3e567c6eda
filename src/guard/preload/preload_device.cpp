// The device runtime's and driver's plain allocation entry points, interposed by the preload
// library of `mate guard-run`: cudaMalloc/cudaFree, cudaMallocAsync/cudaFreeAsync,
// cuMemAlloc_v2/cuMemFree_v2 and the MUSA names. Each allocation is served by the guarded
// allocator of the device it is for (its stream's, the runtime's current device, or the current
// context's), on the driver MATE_DEVICE_DRIVER selects, made on that device's first allocation
// with the mode and flags `mate guard-run` was given (mate::guard::device_guard_allocator).
// Anything the guard does not serve (no driver, a pointer it did not return, the other vendor's
// calls) goes to the next definition (RTLD_NEXT).
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

#include "mate/device/driver.hpp"
#include "mate/device/vendors.hpp"
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

// The configuration device guards are made with (the bootstrap's, on the driver
// MATE_DEVICE_DRIVER selects), or nullptr when there is no driver (said once).
const mate::guard::GuardAllocatorConfig* device_config() noexcept {
  static std::once_flag once;
  static mate::guard::GuardAllocatorConfig config;
  static bool ready = false;
  std::call_once(once, [] {
    const mate::guard::GuardAllocatorConfig* bootstrap = mate::guard::preload::bootstrap_config();
    if (bootstrap == nullptr) return;
    Inside inside;
    std::string reason;
    // The driver only: no context on device 0 for a process that works on another GPU.
    const std::optional<Kind> kind = mate::device::selected_driver_kind(&reason);
    if (!kind) {
      std::fprintf(stderr, "mate guard-run: device allocations are not guarded: %s\n", reason.c_str());
      return;
    }
    config = *bootstrap;
    config.backend = *kind;
    config.map_entry_limit = 0;  // device mappings take no host memory-map entries
    ready = true;
  });
  return ready ? &config : nullptr;
}

// The runtime's cudaGetDevice / musaGetDevice, looked up in the global scope until found, then
// kept (dlsym takes the loader's lock: not once per allocation).
using GetDevice = int (*)(int*);
GetDevice runtime_get_device(Kind kind) noexcept {
  static std::atomic<GetDevice> found[mate::device::kKindCount];
  std::atomic<GetDevice>& slot = found[mate::device::kind_index(kind)];
  if (GetDevice get = slot.load(std::memory_order_acquire)) return get;
  Inside inside;  // dlsym's own allocations
  auto get = reinterpret_cast<GetDevice>(dlsym(RTLD_DEFAULT, kind == Kind::Cuda ? "cudaGetDevice" : "musaGetDevice"));
  if (get != nullptr) slot.store(get, std::memory_order_release);
  return get;
}

// The device an allocation through `kind`'s runtime API (`runtime`) or driver API goes to: a
// stream-ordered one's (`stream`, not the null, legacy or per-thread handle) is the stream's
// device, whose memory pool serves it; else the runtime's current device (cudaGetDevice /
// musaGetDevice, when the runtime is in the global scope, as PyTorch loads it), else the device
// of the thread's current context, else device 0 (the runtime's default; a driver-API call
// without a context, which the real driver refuses, is served there too).
int ordinal_for(Kind kind, bool runtime, void* stream) noexcept {
  int ordinal = -1;
  if (reinterpret_cast<std::uintptr_t>(stream) > 2) {
    Inside inside;
    if (mate::device::stream_device(kind, stream, &ordinal).ok() && ordinal >= 0) return ordinal;
  }
  if (runtime) {
    // Called as the program would (its allocations the program's): it may start the runtime.
    if (GetDevice get = runtime_get_device(kind); get != nullptr && get(&ordinal) == kSuccess && ordinal >= 0)
      return ordinal;
  }
  Inside inside;
  if (mate::device::current_device(kind, &ordinal).ok() && ordinal >= 0) return ordinal;
  return 0;
}

// The guard of device `ordinal`, or nullptr (an ordinal without a guard: said once per ordinal).
GuardAllocator* device_guard(Kind kind, const mate::guard::GuardAllocatorConfig& config, int ordinal) noexcept {
  Inside inside;
  std::string error;
  GuardAllocator* guard = mate::guard::device_guard_allocator(ordinal, config, &error);
  if (guard == nullptr) {
    static std::atomic<unsigned> said{0};  // one bit per ordinal below 32
    const unsigned bit = ordinal >= 0 && ordinal < 32 ? 1u << ordinal : 1u << 31;
    if ((said.fetch_or(bit) & bit) == 0)
      std::fprintf(stderr, "mate guard-run: %s allocations on device %d are not guarded: %s\n",
                   mate::device::kind_name(kind), ordinal, error.c_str());
  }
  return guard;
}

template <class Fn>
Fn next(const char* name) noexcept {
  Inside inside;
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// Returns true when the guard served the allocation (result in *code). `runtime`: a runtime-API
// call (its current device is the runtime's), else a driver-API one (the current context's).
bool guarded_alloc(Kind kind, bool runtime, std::uintptr_t* out, std::size_t bytes, void* stream, int* code) noexcept {
  if (inside_flag()) return false;
  const mate::guard::GuardAllocatorConfig* config = device_config();
  if (config == nullptr || config->backend != kind) return false;  // no driver, or the other vendor's call
  GuardAllocator* guard = device_guard(kind, *config, ordinal_for(kind, runtime, stream));
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
  if (ptr == 0 || inside_flag()) return false;
  Inside inside;
  // Freed through whichever device's guard made it (a free needs no particular current device).
  GuardAllocator* guard = mate::guard::device_guard_owning(kind, ptr);
  if (guard == nullptr) return false;
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
    if (guarded_alloc(kind, false, &p, bytes, nullptr, &code)) {                               \
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
    if (guarded_alloc(kind, true, &p, bytes, nullptr, &code)) {                                          \
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
    if (guarded_alloc(kind, true, &p, bytes, stream, &code)) {                                           \
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
