// One guarded allocator per device ordinal, for the entry points that allocate on "the current
// device" or on a device they are told (the preload's cudaMalloc family, the pluggable hooks,
// `mate replay --guard-alloc`): device 0's is the process-wide allocator
// install_guard_allocator() makes; every other ordinal gets its own on its own driver backend
// (that device's primary context), made on its first allocation and kept for the life of the
// process (memory it served is freed through it until exit).
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "mate/device/driver.hpp"
#include "mate/device/vendors.hpp"
#include "mate/guard/allocator.hpp"

namespace mate::guard {

namespace {

struct PerDevice {
  bool tried = false;                     // under Table::mutex
  std::atomic<GuardAllocator*> guard{nullptr};
  std::string error;  // why `guard` is null; written once, under Table::mutex
};

// (A mutex, not std::call_once: libstdc++'s call_once keeps its callable in TLS, whose dynamic
// blocks LeakSanitizer misreads at exit; see driver_backend_for.)
struct Table {
  std::mutex mutex;
  PerDevice slot[device::kKindCount][kMaxGuardedDevices];
};

// Made on first use, never destroyed (frees reach it until the very end of the process), and no
// static initializer: the preload keeps those out of its seldom-run code, and a sanitized build's
// std::string is not constant-initialized.
Table& table() {
  static Table* const t = new Table;
  return *t;
}

void install(PerDevice& slot, int ordinal, const GuardAllocatorConfig& config) {
  try {
    if (ordinal == 0) {
      slot.guard = &install_guard_allocator(config);
      return;
    }
    std::string reason;
    auto backend = device::open_driver_backend(config.backend, ordinal, &reason);
    if (backend == nullptr) {
      slot.error = "invalid device " + std::to_string(ordinal) + ": " + reason;
      return;
    }
    // Its mappings are guarded ones: device 0's install, which refuses to start after MATE
    // mapped device memory unguarded, must not count them (device 1 may allocate first).
    backend->set_guard_owned();
    slot.guard = new GuardAllocator(*backend.release(), config);
    install_fault_handler();  // (install_guard_allocator() does it for device 0's)
  } catch (const std::exception& e) {
    slot.error = e.what();
  }
}

}  // namespace

GuardAllocator* device_guard_allocator(int ordinal, const GuardAllocatorConfig& config, std::string* error) {
  if (config.backend == device::Kind::Host) {
    if (error != nullptr) *error = "device_guard_allocator: host memory has no device ordinals";
    return nullptr;
  }
  if (ordinal < 0 || ordinal >= kMaxGuardedDevices) {
    if (error != nullptr)
      *error = "invalid device " + std::to_string(ordinal) + ": accepted ordinals are 0 to " +
               std::to_string(kMaxGuardedDevices - 1) + " (and only those the driver lists)";
    return nullptr;
  }
  Table& t = table();
  PerDevice& slot = t.slot[device::kind_index(config.backend)][ordinal];
  if (GuardAllocator* guard = slot.guard.load(std::memory_order_acquire)) return guard;
  std::lock_guard<std::mutex> lock(t.mutex);
  if (!slot.tried) {
    slot.tried = true;
    install(slot, ordinal, config);
  }
  GuardAllocator* guard = slot.guard.load(std::memory_order_acquire);
  if (guard == nullptr && error != nullptr) *error = slot.error;
  return guard;
}

GuardAllocator* device_guard_owning(device::Kind kind, std::uintptr_t address) noexcept {
  if (kind == device::Kind::Host) return nullptr;
  for (PerDevice& slot : table().slot[device::kind_index(kind)]) {
    GuardAllocator* guard = slot.guard.load(std::memory_order_acquire);
    if (guard != nullptr && guard->owns(address)) return guard;
  }
  return nullptr;
}

std::vector<GuardAllocator*> device_guard_allocators(device::Kind kind) {
  std::vector<GuardAllocator*> out;
  if (kind == device::Kind::Host) return out;
  for (PerDevice& slot : table().slot[device::kind_index(kind)])
    if (GuardAllocator* guard = slot.guard.load(std::memory_order_acquire)) out.push_back(guard);
  return out;
}

}  // namespace mate::guard
