// Which device::Backend serves a tensor's memory, and the chunked copies out of and into it.
#include "mate/tensor/memory.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>

#include "mate/device/driver.hpp"
#include "mate/device/vendors.hpp"

#include "host_read_guard.hpp"

namespace mate::tensor {

namespace {
std::atomic<device::Backend*> backends[device::kKindCount];  // indexed by device::kind_index
thread_local const std::string* skipped_reads[device::kKindCount] = {};  // see DeviceReadsSkipped

std::string read_failure(const device::Backend& backend, DLDevice d, const device::Status& st) {
  return std::string(backend.name()) + " read of " + device_name(d) + " memory failed (" + (st.what ? st.what : "?") +
         ", code " + std::to_string(st.code) + ")";
}
}  // namespace

void set_device_backend(device::Kind kind, device::Backend* backend) noexcept {
  backends[device::kind_index(kind)].store(backend, std::memory_order_release);
}

DeviceReadsSkipped::DeviceReadsSkipped(device::Kind kind, std::string reason)
    : kind_(kind), reason_(std::move(reason)), previous_(skipped_reads[device::kind_index(kind)]) {
  skipped_reads[device::kind_index(kind)] = &reason_;
}

DeviceReadsSkipped::~DeviceReadsSkipped() { skipped_reads[device::kind_index(kind_)] = previous_; }

const std::string* device_reads_skipped(device::Kind kind) noexcept {
  return skipped_reads[device::kind_index(kind)];
}

device::Backend* backend_for(DLDevice d, std::string* reason) noexcept {
  const Memory m = memory_of(d);
  if (m == Memory::Host) return &device::host_backend();
  if (m == Memory::Other) {
    if (reason != nullptr) *reason = "MATE reads no " + device_name(d) + " memory";
    return nullptr;
  }
  const device::Kind kind = device_kind(m);
  if (device::Backend* b = backends[device::kind_index(kind)].load(std::memory_order_acquire)) return b;
  try {
    std::string why;
    if (device::DriverBackend* driver = device::driver_backend_for(kind, d.device_id, &why)) return driver;
    if (reason != nullptr) *reason = why;
  } catch (const std::exception& e) {  // a bad MATE_DEVICE_DRIVER: reported, never thrown at the host program
    if (reason != nullptr) *reason = e.what();
  }
  return nullptr;
}

std::string copy_extent_out(const TensorView& t, ByteSink sink, void* context, const CopyOptions& options) {
  const Layout layout = t.layout();
  if (layout.error != nullptr) return std::string("invalid layout (") + layout.error + "): nothing read";
  const ByteExtent e = layout.extent;
  if (e.size() == 0) return "";
  if (t.dl().data == nullptr) return "the tensor's data pointer is null";
  const std::uintptr_t lo = t.origin() + static_cast<std::uintptr_t>(e.begin);
  const std::size_t total = static_cast<std::size_t>(e.size());
  const std::size_t chunk = std::max<std::size_t>(options.chunk_bytes, 1);
  const Memory m = t.memory();
  if (m == Memory::Host) {
    // A stale or wild pointer (or a device address described as CPU memory) is an error here,
    // not a crash of the program being dumped (see host_read_guard.hpp).
    std::uintptr_t fault = 0;
    if (!detail::host_range_readable(lo, lo + total, fault))
      return detail::host_memory_not_readable(fault, lo, lo + total);
    for (std::size_t done = 0; done < total;) {
      const std::size_t n = std::min(chunk, total - done);
      if (!sink(context, reinterpret_cast<const void*>(lo + done), n)) return "write failed";
      done += n;
    }
    return "";
  }
  if (m == Memory::Other) return "memory of device " + device_name(t.device()) + " cannot be read";
  if (const std::string* why = device_reads_skipped(device_kind(m))) return "not read: " + *why;
  std::string why;
  device::Backend* backend = options.backend ? options.backend : backend_for(t.device(), &why);
  if (backend == nullptr)
    return "no device backend reads " + device_name(t.device()) + " memory" + (why.empty() ? "" : " (" + why + ")");
  std::vector<std::uint8_t> staging(std::min(chunk, total));
  for (std::size_t done = 0; done < total;) {
    const std::size_t n = std::min(staging.size(), total - done);
    device::Status st = backend->read(staging.data(), lo + done, n);
    if (!st.ok()) return read_failure(*backend, t.device(), st);
    if (!sink(context, staging.data(), n)) return "write failed";
    done += n;
  }
  return "";
}

std::vector<std::uint8_t> read_extent(const TensorView& t, const CopyOptions& options) {
  std::vector<std::uint8_t> out;
  out.reserve(static_cast<std::size_t>(t.extent().size()));
  auto append = [](void* c, const void* data, std::size_t n) {
    auto* v = static_cast<std::vector<std::uint8_t>*>(c);
    v->insert(v->end(), static_cast<const std::uint8_t*>(data), static_cast<const std::uint8_t*>(data) + n);
    return true;
  };
  std::string error = copy_extent_out(t, append, &out, options);
  if (!error.empty()) throw std::runtime_error(error);
  return out;
}

std::string copy_bytes_in(DLDevice d, std::uintptr_t at, const void* bytes, std::size_t count) {
  if (count == 0) return "";
  if (memory_of(d) == Memory::Host) {
    std::memcpy(reinterpret_cast<void*>(at), bytes, count);
    return "";
  }
  std::string why;
  device::Backend* b = backend_for(d, &why);
  if (b == nullptr) return "no device backend writes " + device_name(d) + " memory" + (why.empty() ? "" : " (" + why + ")");
  device::Status st = b->write(at, bytes, count);
  if (!st.ok()) return std::string("copy to ") + device_name(d) + " failed (" + (st.what ? st.what : "?") + ")";
  return "";
}

DLTensor StoredLayout::view_over(std::uintptr_t base) const {
  DLTensor t{};
  t.data = reinterpret_cast<void*>(base - static_cast<std::uintptr_t>(data_begin) - byte_offset);
  t.device = device;
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = const_cast<std::int64_t*>(shape.data());
  t.strides = const_cast<std::int64_t*>(strides.data());
  t.byte_offset = byte_offset;
  return t;
}

}  // namespace mate::tensor
