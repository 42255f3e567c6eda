// mate/device/driver.hpp — device memory through the CUDA or MUSA driver, loaded at run time.
//
// The driver backend implements mate::device::Backend with the vendor driver's virtual-memory
// API (reserve address space, create physical memory, map, set access, unmap, release, free the
// range). The driver library is opened with dlopen — libcuda.so.1 for CUDA, libmusa.so.1 (then
// libmusa.so) for MUSA — and its entry points are resolved by prefix (`cu…` / `mu…`), so one
// MATE binary runs on machines with either driver or neither, and CUDA and MUSA share one
// implementation.
//
// Contract:
//  * Nothing here throws for a missing or broken driver: the functions return nullptr / an empty
//    list plus a reason naming what was tried and what failed (dlopen's message, the missing
//    symbol, the driver's error name).
//  * MATE_DEVICE_DRIVER (auto|cuda|musa) chooses the driver; MATE_FAKE_DRIVER_PATH (tests) loads
//    a library at that path instead of the vendor one, for either prefix. An invalid value of
//    either variable is reported as the reason (the registry's message), not thrown.
//  * A backend serves one device (ordinal `device()`), using that device's primary context,
//    which it makes current around each call that needs one and restores afterwards.
//  * map() creates one physical allocation of exactly `bytes` and maps it at `addr`; unmap()
//    must name exactly a range given to one map() (the driver cannot unmap a sub-range). Both
//    need granularity-aligned addresses and sizes; misuse comes back as a Status whose `what`
//    says what was wrong, before the driver is called.
//  * Unlike the host backend, map() allocates (an entry in the backend's address → physical
//    allocation table): the driver backend never serves a malloc interposer.
//  * Device memory is not host-dereferenceable: write()/read()/fill() are synchronous driver
//    copies / memset. A kernel's invalid access is not a host signal: the driver reports it as a
//    sticky error (CUDA_ERROR_ILLEGAL_ADDRESS, 700) from the next synchronize().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mate/device/backend.hpp"

namespace mate::device {

// Compute capability of one device, e.g. {9, 0} for sm_90.
struct DeviceArch {
  int major = 0;
  int minor = 0;
  bool operator==(const DeviceArch&) const = default;
};
// "9.0": the form MATE_CUDA_ARCH_LIST / MATE_MUSA_ARCH_LIST use.
std::string to_string(DeviceArch arch);

class DriverBackend : public Backend {
 public:
  // The device ordinal this backend allocates on. name() is the kind's for device 0 ("cuda") and
  // names the ordinal for the others ("cuda:1"), so that reports say which device.
  virtual int device() const noexcept = 0;
  // This backend's mappings are a guarded allocator's own: device_memory_mapped_count() leaves
  // them out (the install check it serves is about memory MATE mapped unguarded).
  virtual void set_guard_owned() noexcept = 0;
  // Makes this backend's device current on the calling thread (its primary context, as
  // cudaSetDevice does), with *previous the context that was; restore_current(previous) puts that
  // back. For running code as it ran on this device (replay).
  virtual Status make_current(void** previous) noexcept = 0;
  virtual Status restore_current(void* previous) noexcept = 0;
  // The library that was opened (a soname such as "libcuda.so.1", or the fake's path).
  virtual const char* library() const noexcept = 0;
  virtual DeviceArch arch() const noexcept = 0;
  // The driver's name and description for a result code ("CUDA_ERROR_INVALID_VALUE",
  // "invalid argument"); never nullptr.
  virtual const char* error_name(int code) const noexcept = 0;
  virtual const char* error_string(int code) const noexcept = 0;
};

// What probing one driver found.
struct DriverProbe {
  Kind kind = Kind::Cuda;
  bool opened = false;         // the library was opened
  bool loaded = false;         // ... every entry point resolved and the driver initialized
  std::string library;         // what was opened ("" when nothing could be)
  int driver_version = 0;      // e.g. 13000 for 13.0; 0 when unknown
  std::vector<DeviceArch> devices;  // one entry per visible device
  std::string reason;          // why nothing usable was found ("" when devices were found)
};

// Opens the driver of `kind` (Cuda or Musa), initializes it and lists its devices. Honors
// MATE_FAKE_DRIVER_PATH. Does not create contexts. Never throws.
DriverProbe probe_driver(Kind kind);

// Architectures of the visible devices of `kind`, in ordinal order; empty when the driver or
// its devices are missing (for JIT arch auto-detection).
std::vector<DeviceArch> visible_device_archs(Kind kind);

// A new backend for device `device` of driver `kind`, or nullptr with *reason set. Honors
// MATE_FAKE_DRIVER_PATH; ignores MATE_DEVICE_DRIVER. Not cached: tests use it directly.
std::unique_ptr<DriverBackend> open_driver_backend(Kind kind, int device, std::string* reason);

// A new backend for device 0 of the driver MATE_DEVICE_DRIVER selects (auto: CUDA, then MUSA,
// the first with a device), or nullptr with *reason set. Not cached.
std::unique_ptr<DriverBackend> open_selected_driver_backend(std::string* reason);

// The process-wide driver backend: open_selected_driver_backend() on first call, kept for the
// life of the process (never destroyed). nullptr with *reason (may be nullptr) when none.
DriverBackend* driver_backend(std::string* reason = nullptr);

// The backend for memory of `kind` (Cuda or Musa): the process-wide one when it drives that kind;
// under MATE_DEVICE_DRIVER=auto, otherwise, one of that kind opened once and kept (auto selects
// one driver, CUDA first, but a MUSA tensor still needs MUSA's); nullptr when there is none or
// MATE_DEVICE_DRIVER names the other driver. Throws ConfigError for a bad MATE_DEVICE_DRIVER.
DriverBackend* driver_backend_for(Kind kind);

// The driver kind MATE_DEVICE_DRIVER selects (auto: CUDA, then MUSA, the first with a device),
// found without making any context (driver_backend() retains device 0's primary context, which
// a process working on another GPU must not pay for); nullopt with *reason when there is none or
// the variable is invalid. The driver stays loaded.
std::optional<Kind> selected_driver_kind(std::string* reason = nullptr);
// The ordinal of the device whose context is current on the calling thread, for driver `kind`
// (-1 when none is); and of the device `stream` (a CUstream/MUstream) belongs to (for the null
// stream and the legacy 0x1 and per-thread 0x2 handles, the current one). Neither makes or
// changes a context for good. Fail (a Status naming the entry point) where the driver lacks the
// optional cuCtxGetDevice or cuStreamGetCtx.
Status current_device(Kind kind, int* ordinal) noexcept;
Status stream_device(Kind kind, void* stream, int* ordinal) noexcept;

// The backend for device `device` of `kind`: driver_backend_for(kind) for device 0; for another
// ordinal, one opened on its first use and kept for the life of the process (its primary
// context retained). nullptr with *reason (may be nullptr) when there is none: no driver of that
// kind, or an ordinal the driver does not have. Throws ConfigError for a bad MATE_DEVICE_DRIVER.
DriverBackend* driver_backend_for(Kind kind, int device, std::string* reason = nullptr);

// How many times any driver backend of `kind` in this process mapped device memory: the guarded
// allocator's install refuses to start after the first (the seed's "must be installed before the
// first MUSA allocation in the process").
std::uint64_t device_memory_mapped_count(Kind kind) noexcept;

// One line for `mate version` / `mate env`, e.g.
// "host (mmap); cuda driver: libcuda.so.1 13.0, 1 device (9.0); musa driver: not found
// (libmusa.so.1: cannot open shared object file ...)".
std::string device_backends_summary();

// A Status from any backend in words: "<what>: CUDA_ERROR_INVALID_VALUE (invalid argument)"
// for a driver backend, "<what>: <strerror>" for the host backend.
std::string describe(const Backend& backend, Status status);

}  // namespace mate::device
