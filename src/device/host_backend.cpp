// The host backend: anonymous mappings, reserved with PROT_NONE and made accessible on demand.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "mate/device/backend.hpp"

namespace mate::device {

namespace {

Status from_errno(const char* what) noexcept { return Status{errno != 0 ? errno : EINVAL, what}; }

class HostBackend final : public Backend {
 public:
  HostBackend() noexcept : page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {}

  Kind kind() const noexcept override { return Kind::Host; }
  const char* name() const noexcept override { return "host"; }
  std::size_t granularity() const noexcept override { return page_; }
  std::size_t default_alignment() const noexcept override { return 16; }

  Status reserve(std::size_t bytes, std::uintptr_t* base) noexcept override {
    // MAP_NORESERVE: reserved address space is not committed memory.
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return from_errno("mmap(PROT_NONE) to reserve address space");
    *base = reinterpret_cast<std::uintptr_t>(p);
    return Status::success();
  }

  Status release(std::uintptr_t base, std::size_t bytes) noexcept override {
    if (munmap(reinterpret_cast<void*>(base), bytes) != 0) return from_errno("munmap");
    return Status::success();
  }

  Status map(std::uintptr_t addr, std::size_t bytes) noexcept override {
    if (mprotect(reinterpret_cast<void*>(addr), bytes, PROT_READ | PROT_WRITE) != 0)
      return from_errno("mprotect(PROT_READ|PROT_WRITE)");
    return Status::success();
  }

  Status unmap(std::uintptr_t addr, std::size_t bytes) noexcept override {
    // Replacing the pages with a fresh PROT_NONE mapping returns their memory to the system
    // (mprotect alone would keep them resident) while the address space stays reserved.
    void* p = mmap(reinterpret_cast<void*>(addr), bytes, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) return from_errno("mmap(MAP_FIXED, PROT_NONE) to drop pages");
    return Status::success();
  }

  Status write(std::uintptr_t dst, const void* src, std::size_t bytes) noexcept override {
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    return Status::success();
  }

  Status read(void* dst, std::uintptr_t src, std::size_t bytes) noexcept override {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return Status::success();
  }

  Status copy_within(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes) noexcept override {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    return Status::success();
  }

  Status fill(std::uintptr_t dst, unsigned char value, std::size_t bytes) noexcept override {
    std::memset(reinterpret_cast<void*>(dst), value, bytes);
    return Status::success();
  }

  Status synchronize() noexcept override { return Status::success(); }

 private:
  std::size_t page_;
};

}  // namespace

Backend& host_backend() noexcept {
  // Constructed in static storage and never destroyed: it serves allocations until the very
  // end of the process, and registering a destructor could itself call malloc.
  alignas(HostBackend) static unsigned char storage[sizeof(HostBackend)];
  static HostBackend* backend = new (storage) HostBackend();
  return *backend;
}

}  // namespace mate::device
