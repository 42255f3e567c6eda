// mate/device/backend.hpp — the platform operations MATE needs from a kind of memory.
//
// The guarded allocator, tensor statistics and dumps see memory only through this interface:
// the host backend (mmap/mprotect, src/device/host_backend.cpp) and the driver backend for CUDA
// and MUSA (the virtual-memory API of the vendor driver, loaded with dlopen) implement it.
//
// Contract:
//  * Addresses are plain integers: device pointers are not host-dereferenceable.
//  * reserve() returns inaccessible address space; map() makes [addr, addr+bytes) readable and
//    writable, backed by fresh memory; unmap() drops the memory and makes the range
//    inaccessible again while keeping the reservation; release() returns the address space.
//    map()/unmap() ranges are granularity-aligned and one unmap() matches one map() exactly
//    (the driver API cannot unmap a sub-range).
//  * write()/read() copy between host memory and mapped memory; fill() sets bytes.
//  * Nothing here allocates heap memory or throws, so the host backend can serve a malloc
//    interposer. Errors come back as a Status with a static message.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace mate::device {

enum class Kind { Host, Cuda, Musa };

// Result of a backend operation. `what` is a static string (never freed) describing the
// failing call; `code` is errno for the host backend and the driver's result code otherwise.
struct Status {
  int code = 0;
  const char* what = nullptr;
  bool ok() const noexcept { return code == 0; }
  static Status success() noexcept { return {}; }
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Kind kind() const noexcept = 0;
  // Short name for reports: "host", "cuda", "musa".
  virtual const char* name() const noexcept = 0;
  // Mapping granularity in bytes: the page size on the host, the minimum allocation
  // granularity of the device otherwise. A power of two.
  virtual std::size_t granularity() const noexcept = 0;
  // The alignment user pointers get by default (16 on the host, 256 on devices).
  virtual std::size_t default_alignment() const noexcept = 0;

  virtual Status reserve(std::size_t bytes, std::uintptr_t* base) noexcept = 0;
  virtual Status release(std::uintptr_t base, std::size_t bytes) noexcept = 0;
  virtual Status map(std::uintptr_t addr, std::size_t bytes) noexcept = 0;
  virtual Status unmap(std::uintptr_t addr, std::size_t bytes) noexcept = 0;

  virtual Status write(std::uintptr_t dst, const void* src, std::size_t bytes) noexcept = 0;
  virtual Status read(void* dst, std::uintptr_t src, std::size_t bytes) noexcept = 0;
  virtual Status fill(std::uintptr_t dst, unsigned char value, std::size_t bytes) noexcept = 0;
  // Page-locks [host, host + bytes) so that write()/read() from it run at the bus's speed (the
  // guard's canary staging buffer; a pageable copy goes through the driver's own staging at
  // about a third of it). Optional: an error (or a driver without the call) leaves the memory
  // pageable and every copy still works. unpin_host() undoes a successful pin_host(). A backend
  // without it (the host's: nothing to pin) returns an error.
  virtual Status pin_host(void* host, std::size_t bytes) noexcept {
    (void)host;
    (void)bytes;
    return {ENOSYS, "pin_host: this backend cannot page-lock host memory"};
  }
  virtual Status unpin_host(void* host) noexcept {
    (void)host;
    return {ENOSYS, "unpin_host: this backend cannot page-lock host memory"};
  }
  // Copies [src, src + bytes) to [dst, dst + bytes), both mapped memory of this backend, and
  // returns once the bytes are in place (as write() does). Optional: a backend without a
  // device-side copy returns an error and the caller copies through the host.
  virtual Status copy_within(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes) noexcept {
    (void)dst;
    (void)src;
    (void)bytes;
    return {ENOSYS, "copy_within: this backend has no device-side copy"};
  }
  // Waits for all work queued on the device (a no-op on the host).
  virtual Status synchronize() noexcept = 0;
  // Sets *capturing when work queued on `stream` (a CUstream / MUstream handle; nullptr is the
  // legacy default stream) is being captured into a graph, where allocating or freeing through
  // the guarded allocator is not supported (the legacy stream counts as capturing while a
  // blocking stream captures: it cannot be used until the capture ends). The host never
  // captures.
  virtual Status is_capturing(void* stream, bool* capturing) noexcept {
    (void)stream;
    *capturing = false;
    return Status::success();
  }
};

// The process-wide host backend.
Backend& host_backend() noexcept;

}  // namespace mate::device
