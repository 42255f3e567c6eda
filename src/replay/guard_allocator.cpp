// The guarded allocator behind replay::TensorAllocator. Compiled only when the build has the
// guard component (src/replay/CMakeLists.txt).
#include "mate/replay/guard_allocator.hpp"

#include <stdexcept>

#include "mate/guard/allocator.hpp"

namespace mate::replay {

namespace {

class GuardTensorAllocator final : public TensorAllocator {
 public:
  explicit GuardTensorAllocator(guard::Mode mode) : mode_(mode) {}

  std::uintptr_t allocate(DLDevice device, std::size_t bytes) override {
    const tensor::Memory m = tensor::memory_of(device);
    if (m == tensor::Memory::Other) throw std::runtime_error("no guarded allocator for " + tensor::device_name(device) + " memory");
    guard::GuardAllocatorConfig config;
    config.mode = mode_;
    config.backend = tensor::device_kind(m);
    guard::GuardAllocator* allocator = nullptr;
    if (m == tensor::Memory::Host) {
      allocator = &guard::install_guard_allocator(config);  // throws GuardError with the reason
    } else {
      // The guard of the tensor's own device ordinal (device 0's is the process-wide one).
      std::string error;
      allocator = guard::device_guard_allocator(device.device_id, config, &error);
      if (allocator == nullptr)
        throw std::runtime_error("no guarded allocator for " + tensor::device_name(device) + " memory: " + error +
                                 "; --device N replays every device tensor on device N instead");
    }
    guard::AllocResult r = allocator->allocate(bytes);
    if (!r) throw std::runtime_error(std::string("guarded allocation of ") + std::to_string(bytes) + " bytes failed: " + (r.message ? r.message : "?"));
    return r.ptr;
  }

  void deallocate(DLDevice device, std::uintptr_t address, std::size_t) noexcept override {
    // Frees check the canaries: an overrun that stayed inside the mapping is reported here.
    const device::Kind kind = tensor::device_kind(tensor::memory_of(device));
    guard::GuardAllocator* a =
        kind == device::Kind::Host ? guard::installed_guard_allocator(kind) : guard::device_guard_owning(kind, address);
    if (a != nullptr) a->deallocate(address);
  }

 private:
  guard::Mode mode_;
};

}  // namespace

std::unique_ptr<TensorAllocator> make_guard_allocator(const std::string& mode) {
  if (mode != "tail" && mode != "head") throw std::invalid_argument("guard mode \"" + mode + "\" is not tail or head");
  return std::make_unique<GuardTensorAllocator>(mode == "tail" ? guard::Mode::Tail : guard::Mode::Head);
}

}  // namespace mate::replay
