// libmate_guard_hooks.so: the C ABI of include/mate/guard/pluggable.h over guarded allocators on
// the selected device driver, one per device ordinal (each on its own driver backend, i.e. that
// device's primary context), created on the device's first allocation.
#include "mate/guard/pluggable.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "mate/config.hpp"
#include "mate/device/driver.hpp"
#include "mate/guard/allocator.hpp"

namespace {

// At most this many device ordinals; the guard's fault handler searches at most 16 allocators
// (host included), so the hooks stay below that.
constexpr int kMaxDevices = 8;

struct PerDevice {
  std::once_flag once;
  mate::guard::GuardAllocator* guard = nullptr;
  std::string error;  // why `guard` is null, said on every refused call
};
PerDevice g_devices[kMaxDevices];

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

void install(int device) {
  PerDevice& slot = g_devices[device];
  try {
    std::string reason;
    mate::device::DriverBackend* selected = mate::device::driver_backend(&reason);
    if (selected == nullptr) {
      slot.error = "no device driver: " + reason;
      return;
    }
    const auto config = config_for(selected->kind());
    if (device == selected->device()) {
      // The process-wide allocator, so describe() and install_guard_allocator() agree on it.
      slot.guard = &mate::guard::install_guard_allocator(config);
      return;
    }
    // Another ordinal: its own backend and allocator, kept for the life of the process (the
    // framework frees through them until exit).
    auto backend = mate::device::open_driver_backend(selected->kind(), device, &reason);
    if (backend == nullptr) {
      slot.error = "invalid device " + std::to_string(device) + ": " + reason;
      return;
    }
    slot.guard = new mate::guard::GuardAllocator(*backend.release(), config);
    mate::guard::install_fault_handler();  // (install_guard_allocator() does it for the others)
  } catch (const std::exception& e) {
    slot.error = e.what();
  }
}

// The allocator for `device`, or nullptr after a message naming `who` and why.
mate::guard::GuardAllocator* guard_for(int device, const char* who) {
  if (device < 0 || device >= kMaxDevices) {
    std::fprintf(stderr, "%s: invalid device %d: accepted ordinals are 0 to %d (and only those the driver "
                 "lists)\n", who, device, kMaxDevices - 1);
    return nullptr;
  }
  PerDevice& slot = g_devices[device];
  std::call_once(slot.once, install, device);
  if (slot.guard == nullptr) std::fprintf(stderr, "%s: %s\n", who, slot.error.c_str());
  return slot.guard;
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
