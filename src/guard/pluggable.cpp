// libmate_guard_hooks.so: the C ABI of include/mate/guard/pluggable.h over the process-wide
// guarded allocator on the selected device driver.
#include "mate/guard/pluggable.h"

#include <cstdio>
#include <mutex>
#include <string>

#include "mate/config.hpp"
#include "mate/device/driver.hpp"
#include "mate/guard/allocator.hpp"

namespace {

mate::guard::GuardAllocator* g_guard = nullptr;
std::once_flag g_once;

void install() {
  try {
    std::string reason;
    mate::device::DriverBackend* selected = mate::device::driver_backend(&reason);
    if (selected == nullptr) {
      std::fprintf(stderr, "mate_guard_alloc: no device driver: %s\n", reason.c_str());
      return;
    }
    mate::guard::GuardAllocatorConfig config;
    config.backend = selected->kind();
    if (mate::config::guard_allocator_mode() == "head") config.mode = mate::guard::Mode::Head;
    if (mate::config::is_set(mate::config::Var::MATE_GUARD_ALLOCATOR_SYNC_ON_FREE))
      config.sync_on_free = mate::config::guard_allocator_sync_on_free();
    config.log_allocations = mate::config::guard_allocator_log_allocations();
    g_guard = &mate::guard::install_guard_allocator(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mate_guard_alloc: %s\n", e.what());
  }
}

}  // namespace

#define MATE_EXPORT extern "C" __attribute__((visibility("default")))

MATE_EXPORT void* mate_guard_alloc(ssize_t size, int device, void* stream) {
  std::call_once(g_once, install);
  if (g_guard == nullptr) return nullptr;
  if (device != 0 || size < 0) {
    std::fprintf(stderr, "mate_guard_alloc: %s (device %d, size %zd); the guarded allocator serves device 0\n",
                 size < 0 ? "negative size" : "unsupported device", device, size);
    return nullptr;
  }
  auto r = g_guard->allocate(static_cast<std::size_t>(size), 0, stream);
  if (!r) {
    std::fprintf(stderr, "mate_guard_alloc: %s (size %zd)\n", r.message, size);
    return nullptr;
  }
  return reinterpret_cast<void*>(r.ptr);
}

MATE_EXPORT void mate_guard_free(void* ptr, ssize_t size, int device, void* stream) {
  (void)size;
  (void)device;
  if (ptr == nullptr || g_guard == nullptr) return;
  g_guard->deallocate(reinterpret_cast<std::uintptr_t>(ptr), stream);
}
