// mate/tensor/memory.hpp — reaching a tensor's memory, wherever it lives.
//
// The one place that answers "which device::Backend serves this DLDevice" and moves a tensor's
// bytes between its memory and the host. Statistics (the level-5 log), dumps (level 10) and
// replay all go through it; nothing else asks a backend for tensor memory.
//
//  * Host memory (kDLCPU, CUDA host-pinned and managed memory) is read and written directly.
//  * CUDA and MUSA device memory goes through the backend registered for that kind with
//    set_device_backend() (tests, a framework with its own), else the driver backend
//    (device::driver_backend_for), in bounded chunks: never a full-size host copy on the way out.
//  * Other devices cannot be reached: the functions say so, they never crash.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mate/device/backend.hpp"
#include "mate/tensor/tensor_view.hpp"

namespace mate::tensor {

// The backend that reads and writes memory of kind `kind` (Cuda or Musa) in place of the driver
// backends: one set here serves every device ordinal of that kind (tests). nullptr unregisters.
// Thread-safe.
void set_device_backend(device::Kind kind, device::Backend* backend) noexcept;

// The backend serving `d`: the host backend for host memory; for CUDA/MUSA the one set above,
// else the driver backend of d's device ordinal (each device's memory is mapped, copied and
// synchronized in that device's context); nullptr for a device MATE cannot reach, with the
// reason in *reason when given.
device::Backend* backend_for(DLDevice d, std::string* reason = nullptr) noexcept;

// Bytes read from a device per backend read() (the host staging buffer).
inline constexpr std::size_t kDefaultChunkBytes = std::size_t{4} << 20;

struct CopyOptions {
  device::Backend* backend = nullptr;  // nullptr: backend_for(the tensor's device)
  std::size_t chunk_bytes = kDefaultChunkBytes;
};

// Receives the bytes of an extent in order, in pieces; returns false to stop (a write failed).
using ByteSink = bool (*)(void* context, const void* data, std::size_t bytes);

// Copies the bytes `t` touches ([origin + extent.begin, origin + extent.end)) to `sink` in pieces
// of at most options.chunk_bytes. Returns "" or what failed ("write failed" when the sink stopped).
std::string copy_extent_out(const TensorView& t, ByteSink sink, void* context, const CopyOptions& options = {});

// All of `t`'s extent in host memory (chunked reads for device memory). Throws
// std::runtime_error saying what failed.
std::vector<std::uint8_t> read_extent(const TensorView& t, const CopyOptions& options = {});

// While alive on a thread, that thread reads no device memory of `kind`: copy_extent_out and
// read_extent (dumps) fail with "not read: <reason>" and compute_stats answers "stats skipped:
// <reason>", without calling the backend. The API log holds one around the records of a call
// whose stream is being captured into a CUDA/MUSA graph: a synchronous read of device memory is
// illegal there and would invalidate the capture. Scopes nest; the innermost reason wins.
class DeviceReadsSkipped {
 public:
  DeviceReadsSkipped(device::Kind kind, std::string reason);
  ~DeviceReadsSkipped();
  DeviceReadsSkipped(const DeviceReadsSkipped&) = delete;
  DeviceReadsSkipped& operator=(const DeviceReadsSkipped&) = delete;

 private:
  device::Kind kind_;
  std::string reason_;
  const std::string* previous_;
};
// Why this thread skips reading device memory of `kind` now, or nullptr when it does not.
const std::string* device_reads_skipped(device::Kind kind) noexcept;

// Writes `bytes` bytes from host memory to address `at` of device `d`. Returns "" or what failed.
std::string copy_bytes_in(DLDevice d, std::uintptr_t at, const void* bytes, std::size_t count);

// A tensor's layout as stored apart from its memory (a dump's snapshot): enough to place its
// bytes anywhere and view them as the tensor again.
struct StoredLayout {
  DLDataType dtype{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements
  std::uint64_t byte_offset = 0;      // DLTensor::byte_offset of the original
  DLDevice device{kDLCPU, 0};
  // Offset of the first stored byte relative to element (0, ..., 0) (<= 0; < 0 with negative
  // strides): the extent's begin.
  std::int64_t data_begin = 0;

  // A DLTensor whose touched bytes start at `base` (shape and strides point into this object,
  // which must outlive it): data = base - data_begin - byte_offset, so that data + byte_offset is
  // element (0, ..., 0).
  DLTensor view_over(std::uintptr_t base) const;
};

}  // namespace mate::tensor
