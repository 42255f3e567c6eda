// The install API: the process-wide allocators, one per kind of memory, created by
// install_guard_allocator() (which installs the crash handler) and never destroyed: they serve
// allocations until the very end of the process. Also describe() over every allocator and
// write_description().
#include <mutex>
#include <new>

#include "mate/device/driver.hpp"
#include "mate/device/vendors.hpp"
#include "guard/report.hpp"
#include "guard/slot_table.hpp"

namespace mate::guard {

namespace {

struct Installed {
  GuardAllocator* allocator = nullptr;
  std::atomic<bool> served_unguarded{false};
};

Installed g_installed[device::kKindCount];
std::mutex g_install_mutex;

std::size_t slot_of(device::Kind kind) noexcept { return device::kind_index(kind); }

const char* title(device::Kind kind) noexcept { return device::kind_title(kind); }

}  // namespace

GuardAllocator& install_guard_allocator(const GuardAllocatorConfig& config) {
  std::lock_guard lock(g_install_mutex);
  Installed& slot = g_installed[slot_of(config.backend)];
  if (slot.allocator != nullptr) {
    if (slot.allocator->config() == config) return *slot.allocator;
    throw GuardError("guard allocator: already installed with " + describe(slot.allocator->config()) +
                     "; cannot install it again with " + describe(config) +
                     " (repeated installs must use the same config)");
  }
  // MATE's own device memory mapped before (a replayed tensor, another backend) would sit next to
  // guarded memory unguarded: the seed's error. Host memory is the C library's, not counted.
  // (Not asked for host memory: the preload keeps its start-up path off the device code's pages.)
  if (slot.served_unguarded.load() ||
      (config.backend != device::Kind::Host && device::device_memory_mapped_count(config.backend) > 0)) {
    throw GuardError(std::string("Guard allocator must be installed before the first ") + title(config.backend) +
                     " allocation in the process: MATE already served one without it. Install it "
                     "earlier, or use `mate guard-run` so that it is installed before the program "
                     "allocates.");
  }
  device::Backend* backend = &device::host_backend();
  if (config.backend != device::Kind::Host) {
    std::string reason;
    // Kept for the life of the process, like the allocator that uses it.
    backend = device::open_driver_backend(config.backend, 0, &reason).release();
    if (backend == nullptr)
      throw GuardError(std::string("guard allocator: no ") + title(config.backend) + " device backend: " + reason);
  }
  alignas(GuardAllocator) static unsigned char storage[device::kKindCount][sizeof(GuardAllocator)];
  slot.allocator = new (storage[slot_of(config.backend)]) GuardAllocator(*backend, config);
  // The process-wide allocators' faults are reported: the preload, the pluggable hooks and
  // `mate replay --guard-alloc` all install through here.
  install_fault_handler();
  return *slot.allocator;
}

GuardAllocator* installed_guard_allocator(device::Kind kind) noexcept {
  std::lock_guard lock(g_install_mutex);
  return g_installed[slot_of(kind)].allocator;
}

void note_backend_allocation(device::Kind kind) noexcept {
  g_installed[slot_of(kind)].served_unguarded.store(true);
}

Description describe(std::uintptr_t address) noexcept {
  Registered regs[kMaxAllocators];
  int n = registered_allocators(regs, kMaxAllocators);
  Description best;
  for (int i = 0; i < n; ++i) {
    Description d = regs[i].allocator->describe(address);
    if (d.found && (!best.found || (best.outside && !d.outside))) best = d;
  }
  return best;
}

void write_description(int fd, const Description& d, const char* backend_name) noexcept {
  ReportWriter w(fd);
  if (!d.found) {
    w.str("no guarded allocation at or near that address\n");
    return;
  }
  write_place(w, d);
  w.str(" (").str(to_string(d.mode)).str(" mode, ").str(backend_name).str(" memory, reserved ");
  write_range(w, d.reservation, d.reserved);
  w.chr(')');
  if (d.outside) w.str(", outside its reservation");
  w.chr('\n');
}

}  // namespace mate::guard
