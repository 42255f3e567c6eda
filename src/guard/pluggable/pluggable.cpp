// libmate_guard_hooks.so: the C ABI of include/mate/guard/pluggable.h over guarded allocators on
// the selected device driver, one per device ordinal (mate::guard::device_guard_allocator).
#include "mate/guard/pluggable.h"

#include <cstdio>
#include <optional>
#include <string>

#include "mate/config.hpp"
#include "mate/device/driver.hpp"
#include "mate/guard/allocator.hpp"

namespace {

mate::guard::GuardAllocatorConfig config_for(mate::device::Kind kind) {
  // Installed already (mate.memory_debug.install_guard_allocator, in this process's libmate.so):
  // its config, so the hooks serve through that allocator.
  if (const mate::guard::GuardAllocator* installed = mate::guard::installed_guard_allocator(kind)) return installed->config();
  mate::guard::GuardAllocatorConfig config;
  config.backend = kind;
  if (mate::config::guard_allocator_mode() == "head") config.mode = mate::guard::Mode::Head;
  if (mate::config::is_set(mate::config::Var::MATE_GUARD_ALLOCATOR_SYNC_ON_FREE))
    config.sync_on_free = mate::config::guard_allocator_sync_on_free();
  config.log_allocations = mate::config::guard_allocator_log_allocations();
  config.backtraces = mate::config::guard_backtraces();
  if (mate::config::is_set(mate::config::Var::MATE_GUARD_QUARANTINE_MB))  // else the backend's default
    config.quarantine_bytes = static_cast<std::size_t>(mate::config::guard_quarantine_mb()) << 20;
  return config;
}

// The allocator for `device`, or nullptr after a message naming `who` and why.
mate::guard::GuardAllocator* guard_for(int device, const char* who) {
  std::string error;
  mate::guard::GuardAllocator* guard = nullptr;
  try {
    // Chosen once per process, the driver only: no context on device 0 for a process that works
    // on another GPU.
    static std::string reason;
    static const std::optional<mate::device::Kind> kind = mate::device::selected_driver_kind(&reason);
    if (!kind)
      error = "no device driver: " + reason;
    else {
      // Read once (each ordinal's allocator is made with it on its first call).
      static const mate::guard::GuardAllocatorConfig config = config_for(*kind);
      guard = mate::guard::device_guard_allocator(device, config, &error);
    }
  } catch (const std::exception& e) {  // a bad MATE_GUARD_* value
    error = e.what();
  }
  if (guard == nullptr) std::fprintf(stderr, "%s: %s\n", who, error.c_str());
  return guard;
}

}  // namespace

#define MATE_EXPORT extern "C" __attribute__((visibility("default")))

MATE_EXPORT void* mate_guard_alloc(ssize_t size, int device, void* stream) {
  if (size < 0) {
    std::fprintf(stderr, "mate_guard_alloc: negative size %zd (device %d)\n", size, device);
    return nullptr;
  }
  mate::guard::GuardAllocator* guard = guard_for(device, "mate_guard_alloc");
  if (guard == nullptr) return nullptr;
  auto r = guard->allocate(static_cast<std::size_t>(size), 0, stream);
  if (!r) {
    std::fprintf(stderr, "mate_guard_alloc: %s (size %zd, device %d)\n", r.message, size, device);
    return nullptr;
  }
  return reinterpret_cast<void*>(r.ptr);
}

MATE_EXPORT void mate_guard_free(void* ptr, ssize_t size, int device, void* stream) {
  (void)size;
  if (ptr == nullptr) return;
  mate::guard::GuardAllocator* guard = guard_for(device, "mate_guard_free");
  if (guard == nullptr) return;
  guard->deallocate(reinterpret_cast<std::uintptr_t>(ptr), stream);
}
