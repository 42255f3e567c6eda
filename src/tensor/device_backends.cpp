// Which device::Backend reads CUDA and MUSA memory. Filled by the driver backend when it loads.
#include <atomic>

#include "mate/tensor/stats.hpp"

namespace mate::tensor {

namespace {
std::atomic<device::Backend*> backends[3];  // indexed by device::Kind
}

void set_device_backend(device::Kind kind, device::Backend* backend) noexcept {
  backends[static_cast<int>(kind)].store(backend, std::memory_order_release);
}

device::Backend* device_backend(device::Kind kind) noexcept {
  return backends[static_cast<int>(kind)].load(std::memory_order_acquire);
}

}  // namespace mate::tensor
