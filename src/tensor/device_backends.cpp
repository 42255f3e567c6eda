// Which device::Backend reads CUDA and MUSA memory: one set explicitly (tests, a framework with
// its own backend), else the driver backend for that kind of device (device::driver_backend_for).
#include <atomic>

#include "mate/device/driver.hpp"
#include "mate/tensor/stats.hpp"

namespace mate::tensor {

namespace {
std::atomic<device::Backend*> backends[3];  // indexed by device::Kind
}

void set_device_backend(device::Kind kind, device::Backend* backend) noexcept {
  backends[static_cast<int>(kind)].store(backend, std::memory_order_release);
}

device::Backend* device_backend(device::Kind kind) noexcept {
  if (device::Backend* b = backends[static_cast<int>(kind)].load(std::memory_order_acquire)) return b;
  if (kind == device::Kind::Host) return &device::host_backend();
  try {
    if (device::DriverBackend* driver = device::driver_backend_for(kind)) return driver;
  } catch (...) {
    // Statistics report "no backend" rather than fail the host program.
  }
  return nullptr;
}

}  // namespace mate::tensor
