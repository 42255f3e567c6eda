// The driver backend: device memory through a vendor driver's virtual-memory API (see
// mate/device/driver.hpp for the contract), plus probing and choosing a driver among the rows
// of mate/device/vendors.hpp.

#include <atomic>
#include <cstring>
#include <string>
#include <map>
#include <mutex>
#include <optional>
#include <new>

#include "device/driver_api.hpp"
#include "mate/config.hpp"
#include "mate/device/driver.hpp"
#include "mate/device/vendors.hpp"

namespace mate::device {

namespace {

std::atomic<std::uint64_t> g_mapped_count[kKindCount];  // by Kind (the host's stays 0)

using driver::Api;
using driver::Result;

// Makes the backend's context current for the lifetime of the object and restores the caller's
// afterwards: the current context is per thread, and the caller (a framework switching devices)
// may have another one current.
class ContextScope {
 public:
  ContextScope(const Api& api, driver::Context ctx) noexcept : api_(api) {
    result_ = api_.CtxGetCurrent(&previous_);
    if (result_ != driver::kSuccess) return;
    if (previous_ != ctx) {
      result_ = api_.CtxSetCurrent(ctx);
      switched_ = result_ == driver::kSuccess;
    }
  }
  ~ContextScope() {
    if (switched_) api_.CtxSetCurrent(previous_);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  Result result() const noexcept { return result_; }

 private:
  const Api& api_;
  driver::Context previous_ = nullptr;
  Result result_ = driver::kSuccess;
  bool switched_ = false;
};

// An optional entry point the library lacks.
Status missing(const Api& api, driver::Call call) noexcept {
  return {driver::kErrorNotSupported, driver::call_name(api, call)};
}

// The ordinal of the current context's device (a CUdevice is a handle, not promised to be the
// ordinal: the ordinal it stands for is looked up).
Status device_of_current(const Api& api, int* ordinal) noexcept {
  if (api.CtxGetDevice == nullptr) return missing(api, driver::Call::CtxGetDevice);
  driver::Device handle = 0;
  Result r = api.CtxGetDevice(&handle);
  if (r != driver::kSuccess) return {r, driver::call_name(api, driver::Call::CtxGetDevice)};
  int count = 0;
  r = api.DeviceGetCount(&count);
  if (r != driver::kSuccess) return {r, driver::call_name(api, driver::Call::DeviceGetCount)};
  for (int i = 0; i < count; ++i) {
    driver::Device h = 0;
    if (api.DeviceGet(&h, i) == driver::kSuccess && h == handle) {
      *ordinal = i;
      return Status::success();
    }
  }
  return {driver::kErrorInvalidValue, "the current context's device is none of the driver's device ordinals"};
}

Status current_device_of(const Api& api, int* ordinal) noexcept {
  driver::Context ctx = nullptr;
  Result r = api.CtxGetCurrent(&ctx);
  if (r != driver::kSuccess) return {r, driver::call_name(api, driver::Call::CtxGetCurrent)};
  if (ctx == nullptr) {
    *ordinal = -1;
    return Status::success();
  }
  return device_of_current(api, ordinal);
}

Status stream_device_of(const Api& api, void* stream, int* ordinal) noexcept {
  if (reinterpret_cast<std::uintptr_t>(stream) <= 2) return current_device_of(api, ordinal);  // null, legacy, per-thread
  if (api.StreamGetCtx == nullptr) return missing(api, driver::Call::StreamGetCtx);
  driver::Context ctx = nullptr;
  Result r = api.StreamGetCtx(stream, &ctx);
  if (r != driver::kSuccess) return {r, driver::call_name(api, driver::Call::StreamGetCtx)};
  ContextScope scope(api, ctx);  // cuCtxGetDevice answers for the current context
  if (scope.result() != driver::kSuccess) return {scope.result(), api.symbols->make_context_current.c_str()};
  return device_of_current(api, ordinal);
}

driver::MemAllocationProp device_allocation_prop(int device) noexcept {
  driver::MemAllocationProp prop;
  std::memset(&prop, 0, sizeof prop);
  prop.type = driver::kMemAllocationTypePinned;
  prop.requestedHandleTypes = driver::kMemHandleTypeNone;
  prop.location.type = driver::kMemLocationTypeDevice;
  prop.location.id = device;
  return prop;
}

class VmmBackend final : public DriverBackend {
 public:
  VmmBackend(Api api, int device, driver::Device handle, driver::Context ctx,
             std::size_t granularity, DeviceArch arch)
      : api_(std::move(api)),
        device_(device),
        name_(device == 0 ? kind_name(api_.kind) : std::string(kind_name(api_.kind)) + ":" + std::to_string(device)),
        device_handle_(handle),
        ctx_(ctx),
        granularity_(granularity),
        arch_(arch) {}

  ~VmmBackend() override {
    // Mappings still alive belong to whoever made them; only the context reference is ours.
    api_.DevicePrimaryCtxRelease(device_handle_);
  }

  Kind kind() const noexcept override { return api_.kind; }
  const char* name() const noexcept override { return name_.c_str(); }
  std::size_t granularity() const noexcept override { return granularity_; }
  // What cudaMalloc / musaMalloc guarantee.
  std::size_t default_alignment() const noexcept override { return 256; }

  int device() const noexcept override { return device_; }

  void set_guard_owned() noexcept override { guard_owned_ = true; }

  const char* library() const noexcept override { return api_.library.c_str(); }
  DeviceArch arch() const noexcept override { return arch_; }
  const char* error_name(int code) const noexcept override {
    return driver::error_name(api_, code);
  }
  const char* error_string(int code) const noexcept override {
    return driver::error_string(api_, code);
  }

  Status make_current(void** previous) noexcept override {
    driver::Context was = nullptr;
    Result r = api_.CtxGetCurrent(&was);
    if (r == driver::kSuccess && was != ctx_) r = api_.CtxSetCurrent(ctx_);
    if (r != driver::kSuccess) return context_failure(r);
    *previous = was;
    return Status::success();
  }

  Status restore_current(void* previous) noexcept override {
    driver::Context now = nullptr;
    Result r = api_.CtxGetCurrent(&now);
    if (r == driver::kSuccess && now != previous) r = api_.CtxSetCurrent(previous);
    return r == driver::kSuccess ? Status::success() : context_failure(r);
  }

  Status reserve(std::size_t bytes, std::uintptr_t* base) noexcept override {
    if (!aligned(bytes) || bytes == 0)
      return invalid("reserve: size must be a non-zero multiple of the device allocation "
                     "granularity");
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    driver::DevicePtr ptr = 0;
    const Result r = api_.MemAddressReserve(&ptr, bytes, granularity_, 0, 0);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::MemAddressReserve)};
    *base = static_cast<std::uintptr_t>(ptr);
    return Status::success();
  }

  Status release(std::uintptr_t base, std::size_t bytes) noexcept override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = mappings_.lower_bound(base);
      if (it != mappings_.end() && it->first < base + bytes)
        return invalid("release: the range still has mapped memory; unmap it first");
    }
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    const Result r = api_.MemAddressFree(base, bytes);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::MemAddressFree)};
    return Status::success();
  }

  Status map(std::uintptr_t addr, std::size_t bytes) noexcept override {
    if (!aligned(addr) || !aligned(bytes) || bytes == 0)
      return invalid("map: address and size must be non-zero multiples of the device "
                     "allocation granularity");
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    const driver::MemAllocationProp prop = device_allocation_prop(device_);
    driver::AllocationHandle handle = 0;
    Result r = api_.MemCreate(&handle, bytes, &prop, 0);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::MemCreate)};
    r = api_.MemMap(addr, bytes, 0, handle, 0);
    if (r != driver::kSuccess) {
      api_.MemRelease(handle);
      return {r, driver::call_name(api_, driver::Call::MemMap)};
    }
    driver::MemAccessDesc access;
    std::memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = driver::kMemAccessFlagsProtReadWrite;
    r = api_.MemSetAccess(addr, bytes, &access, 1);
    if (r != driver::kSuccess) {
      api_.MemUnmap(addr, bytes);
      api_.MemRelease(handle);
      return {r, driver::call_name(api_, driver::Call::MemSetAccess)};
    }
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      mappings_.emplace(addr, Mapping{bytes, handle});
    } catch (const std::bad_alloc&) {
      api_.MemUnmap(addr, bytes);
      api_.MemRelease(handle);
      return {driver::kErrorOutOfMemory, "map: out of host memory for the mapping table"};
    }
    if (!guard_owned_) g_mapped_count[kind_index(api_.kind)].fetch_add(1, std::memory_order_relaxed);
    return Status::success();
  }

  Status unmap(std::uintptr_t addr, std::size_t bytes) noexcept override {
    Mapping mapping;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = mappings_.find(addr);
      if (it == mappings_.end() || it->second.bytes != bytes)
        return invalid("unmap: the range is not exactly one range given to map() (the driver "
                       "cannot unmap a sub-range)");
      mapping = it->second;
      mappings_.erase(it);
    }
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    Result r = api_.MemUnmap(addr, bytes);
    if (r != driver::kSuccess) {
      std::lock_guard<std::mutex> lock(mutex_);
      mappings_.emplace(addr, mapping);  // still mapped: keep it findable
      return {r, driver::call_name(api_, driver::Call::MemUnmap)};
    }
    // The physical memory is freed here: nothing else maps it.
    r = api_.MemRelease(mapping.handle);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::MemRelease)};
    return Status::success();
  }

  Status write(std::uintptr_t dst, const void* src, std::size_t bytes) noexcept override {
    if (bytes == 0) return Status::success();
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    const Result r = api_.MemcpyHtoD(dst, src, bytes);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::MemcpyHtoD)};
    return Status::success();
  }

  Status read(void* dst, std::uintptr_t src, std::size_t bytes) noexcept override {
    if (bytes == 0) return Status::success();
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    const Result r = api_.MemcpyDtoH(dst, src, bytes);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::MemcpyDtoH)};
    return Status::success();
  }

  Status copy_within(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes) noexcept override {
    if (api_.MemcpyDtoD == nullptr || api_.StreamSynchronize == nullptr)
      return invalid("copy_within: the driver library has no MemcpyDtoD or StreamSynchronize entry point");
    if (bytes == 0) return Status::success();
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    // A device-to-device copy returns before it is done: wait for it on the stream it went to
    // (the legacy default stream), so that the bytes are in place on return, as after write().
    Result r = api_.MemcpyDtoD(dst, src, bytes);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::MemcpyDtoD)};
    r = api_.StreamSynchronize(nullptr);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::StreamSynchronize)};
    return Status::success();
  }

  Status fill(std::uintptr_t dst, unsigned char value, std::size_t bytes) noexcept override {
    if (bytes == 0) return Status::success();
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    const Result r = api_.MemsetD8(dst, value, bytes);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::MemsetD8)};
    return Status::success();
  }

  Status pin_host(void* host, std::size_t bytes) noexcept override {
    if (api_.MemHostRegister == nullptr)
      return invalid("pin_host: the driver library has no MemHostRegister entry point");
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    // Flags 0: page-locked for this context's device; MATE only copies through it.
    const Result r = api_.MemHostRegister(host, bytes, 0);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::MemHostRegister)};
    return Status::success();
  }

  Status unpin_host(void* host) noexcept override {
    if (api_.MemHostUnregister == nullptr)
      return invalid("unpin_host: the driver library has no MemHostUnregister entry point");
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    const Result r = api_.MemHostUnregister(host);
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::MemHostUnregister)};
    return Status::success();
  }

  Status synchronize() noexcept override {
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    const Result r = api_.CtxSynchronize();
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::CtxSynchronize)};
    return Status::success();
  }

  Status is_capturing(void* stream, bool* capturing) noexcept override {
    ContextScope scope(api_, ctx_);
    if (scope.result() != driver::kSuccess) return context_failure(scope.result());
    int status = driver::kStreamCaptureStatusNone;
    const Result r = api_.StreamIsCapturing(stream, &status);
    if (r == driver::kErrorStreamCaptureImplicit) {
      // The legacy stream while a blocking stream captures: unusable until the capture ends,
      // so for the allocator it is inside a capture.
      *capturing = true;
      return Status::success();
    }
    if (r != driver::kSuccess) return {r, driver::call_name(api_, driver::Call::StreamIsCapturing)};
    // An invalidated capture is still a capture in progress: the stream is not usable normally.
    *capturing = status != driver::kStreamCaptureStatusNone;
    return Status::success();
  }

 private:
  struct Mapping {
    std::size_t bytes = 0;
    driver::AllocationHandle handle = 0;
  };

  bool aligned(std::uintptr_t value) const noexcept { return (value & (granularity_ - 1)) == 0; }
  static Status invalid(const char* what) noexcept { return {driver::kErrorInvalidValue, what}; }
  Status context_failure(Result r) const noexcept {
    return {r, api_.symbols->make_context_current.c_str()};
  }

  Api api_;
  int device_;
  std::string name_;  // "cuda" for device 0 (as before there were others), "cuda:1", ...
  bool guard_owned_ = false;  // set_guard_owned(): mappings left out of g_mapped_count
  driver::Device device_handle_;
  driver::Context ctx_;
  std::size_t granularity_;
  DeviceArch arch_;
  std::mutex mutex_;
  std::map<std::uintptr_t, Mapping> mappings_;  // by address: one entry per map()
};

// Loads and initializes the driver; on failure *reason says why. A driver without devices
// (cuInit returns NO_DEVICE) loads fine and reports zero devices.
bool load_and_init(Kind kind, Api* api, int* device_count, std::string* reason) {
  if (!driver::load(kind, api, reason)) return false;
  Result r = api->Init(0);
  if (r == driver::kErrorNoDevice) {
    *device_count = 0;
    *reason = driver::describe_result(*api, driver::call_name(*api, driver::Call::Init), r);
    return true;
  }
  if (r != driver::kSuccess) {
    *reason = api->library + ": " +
              driver::describe_result(*api, driver::call_name(*api, driver::Call::Init), r);
    return false;
  }
  r = api->DeviceGetCount(device_count);
  if (r != driver::kSuccess) {
    *reason = api->library + ": " +
              driver::describe_result(*api, driver::call_name(*api, driver::Call::DeviceGetCount), r);
    return false;
  }
  if (*device_count == 0) *reason = "the driver sees no device";
  return true;
}

bool query_arch(const Api& api, driver::Device device, DeviceArch* arch, std::string* reason) {
  Result r = api.DeviceGetAttribute(&arch->major, driver::kDeviceAttributeComputeCapabilityMajor,
                                    device);
  if (r == driver::kSuccess)
    r = api.DeviceGetAttribute(&arch->minor, driver::kDeviceAttributeComputeCapabilityMinor,
                               device);
  if (r != driver::kSuccess) {
    *reason = driver::describe_result(api, driver::call_name(api, driver::Call::DeviceGetAttribute), r);
    return false;
  }
  return true;
}

std::string arch_list(const std::vector<DeviceArch>& archs) {
  std::string out;
  for (const DeviceArch& a : archs) {
    if (!out.empty()) out += ", ";
    out += to_string(a);
  }
  return out;
}

std::string version_text(int version) {
  if (version <= 0) return "";
  return " " + std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace

std::string to_string(DeviceArch arch) { return std::to_string(arch.major) + "." + std::to_string(arch.minor); }

DriverProbe probe_driver(Kind kind) {
  DriverProbe probe;
  probe.kind = kind;
  Api api;
  int count = 0;
  const bool ok = load_and_init(kind, &api, &count, &probe.reason);
  probe.opened = api.handle != nullptr;
  probe.library = api.library;
  if (!ok) return probe;
  probe.loaded = true;
  if (api.DriverGetVersion(&probe.driver_version) != driver::kSuccess) probe.driver_version = 0;
  for (int i = 0; i < count; ++i) {
    driver::Device device = 0;
    const Result r = api.DeviceGet(&device, i);
    if (r != driver::kSuccess) {
      probe.reason = driver::describe_result(api, driver::call_name(api, driver::Call::DeviceGet), r);
      probe.devices.clear();
      return probe;
    }
    DeviceArch arch;
    if (!query_arch(api, device, &arch, &probe.reason)) {
      probe.devices.clear();
      return probe;
    }
    probe.devices.push_back(arch);
  }
  return probe;
}

std::vector<DeviceArch> visible_device_archs(Kind kind) { return probe_driver(kind).devices; }

std::unique_ptr<DriverBackend> open_driver_backend(Kind kind, int device, std::string* reason) {
  std::string why;
  auto fail = [&](std::string text) -> std::unique_ptr<DriverBackend> {
    if (reason != nullptr) *reason = std::move(text);
    return nullptr;
  };
  if (find_vendor(kind) == nullptr) return fail("the driver backend serves device memory only, not the host's");
  Api api;
  int count = 0;
  if (!load_and_init(kind, &api, &count, &why)) return fail(why);
  if (count == 0) return fail(api.library + ": " + why);
  if (device < 0 || device >= count)
    return fail(api.library + ": device " + std::to_string(device) + " requested but the driver sees " +
                std::to_string(count) + " device(s)");
  driver::Device handle = 0;
  Result r = api.DeviceGet(&handle, device);
  if (r != driver::kSuccess)
    return fail(driver::describe_result(api, driver::call_name(api, driver::Call::DeviceGet), r));
  DeviceArch arch;
  if (!query_arch(api, handle, &arch, &why)) return fail(why);
  const driver::MemAllocationProp prop = device_allocation_prop(device);
  std::size_t granularity = 0;
  r = api.MemGetAllocationGranularity(&granularity, &prop, driver::kMemAllocGranularityMinimum);
  if (r != driver::kSuccess)
    return fail(
        driver::describe_result(api, driver::call_name(api, driver::Call::MemGetAllocationGranularity), r));
  if (granularity == 0 || (granularity & (granularity - 1)) != 0)
    return fail(api.library + ": the driver reports an allocation granularity of " +
                std::to_string(granularity) + " bytes, not a power of two");
  driver::Context ctx = nullptr;
  r = api.DevicePrimaryCtxRetain(&ctx, handle);
  if (r != driver::kSuccess)
    return fail(driver::describe_result(api, driver::call_name(api, driver::Call::DevicePrimaryCtxRetain), r));
  return std::make_unique<VmmBackend>(std::move(api), device, handle, ctx, granularity, arch);
}

namespace {

// MATE_DEVICE_DRIVER ("auto" or a vendor's name); nullopt with the registry's error in `reason`.
std::optional<std::string> driver_choice(std::string* reason) {
  try {
    return config::device_driver();
  } catch (const config::ConfigError& e) {
    if (reason != nullptr) *reason = e.what();
    return std::nullopt;
  }
}

}  // namespace

std::unique_ptr<DriverBackend> open_selected_driver_backend(std::string* reason) {
  const std::optional<std::string> selected = driver_choice(reason);
  if (!selected) return nullptr;
  const std::string& choice = *selected;
  std::string why;
  if (const Vendor* named = find_vendor(choice)) {
    auto backend = open_driver_backend(named->kind, 0, &why);
    if (!backend && reason != nullptr)
      *reason = choice + " driver (MATE_DEVICE_DRIVER=" + choice + "): " + why;
    return backend;
  }
  // auto: the vendors in table order, the first with a device.
  std::string whys;
  for (const Vendor& v : vendors()) {
    if (auto backend = open_driver_backend(v.kind, 0, &why)) return backend;
    whys += (whys.empty() ? "" : "; ") + std::string(v.name) + " driver: " + why;
  }
  if (reason != nullptr) *reason = whys;
  return nullptr;
}

namespace {

// A driver loaded and initialized once per kind, for the questions that need no context of
// MATE's own (which driver is selected, which device is current, a stream's device); kept for
// the life of the process. (A mutex, not std::call_once: see driver_backend_for.)
struct Loaded {
  Api api;
  int count = 0;
  bool ok = false;
  std::string reason;
};

const Loaded& loaded(Kind kind) {
  static std::mutex mutex;
  static Loaded* table[kKindCount] = {};
  std::lock_guard<std::mutex> lock(mutex);
  Loaded*& l = table[kind_index(kind)];
  if (l == nullptr) {
    l = new Loaded;  // never destroyed
    l->ok = load_and_init(kind, &l->api, &l->count, &l->reason);
  }
  return *l;
}

}  // namespace

std::optional<Kind> selected_driver_kind(std::string* reason) {
  const std::optional<std::string> selected = driver_choice(reason);
  if (!selected) return std::nullopt;
  const std::string& choice = *selected;
  std::string whys;
  for (const Vendor& v : vendors()) {
    if (choice != "auto" && choice != v.name) continue;
    const Loaded& l = loaded(v.kind);
    if (l.ok && l.count > 0) return v.kind;
    const std::string why = l.ok ? l.api.library + ": " + l.reason : l.reason;
    whys += (whys.empty() ? "" : "; ") + std::string(v.name) + " driver" +
            (choice == "auto" ? "" : " (MATE_DEVICE_DRIVER=" + choice + ")") + ": " + why;
  }
  if (reason != nullptr) *reason = whys;
  return std::nullopt;
}

Status current_device(Kind kind, int* ordinal) noexcept {
  if (kind == Kind::Host) return {driver::kErrorInvalidValue, "current_device: host memory has no devices"};
  const Loaded& l = loaded(kind);
  if (!l.ok) return {driver::kErrorNotInitialized, "current_device: the driver is not loaded"};
  return current_device_of(l.api, ordinal);
}

Status stream_device(Kind kind, void* stream, int* ordinal) noexcept {
  if (kind == Kind::Host) return {driver::kErrorInvalidValue, "stream_device: host memory has no devices"};
  const Loaded& l = loaded(kind);
  if (!l.ok) return {driver::kErrorNotInitialized, "stream_device: the driver is not loaded"};
  return stream_device_of(l.api, stream, ordinal);
}

DriverBackend* driver_backend(std::string* reason) {
  struct Selected {
    std::unique_ptr<DriverBackend> backend;
    std::string reason;
  };
  // Built once and never destroyed: device memory may be freed until the very end of the
  // process, after static destructors have run.
  static Selected* selected = [] {
    auto* s = new Selected;
    s->backend = open_selected_driver_backend(&s->reason);
    return s;
  }();
  if (reason != nullptr) *reason = selected->reason;
  return selected->backend.get();
}

DriverBackend* driver_backend_for(Kind kind) {
  if (kind == Kind::Host) return nullptr;
  DriverBackend* selected = driver_backend();
  if (selected != nullptr && selected->kind() == kind) return selected;
  if (config::device_driver() != "auto") return nullptr;  // the other kind was asked for by name
  // auto picks one driver for the process (the first vendor with a device); memory of another
  // kind (a MUSA dump replayed where both drivers are installed) gets a backend of its own,
  // opened once, kept. (A mutex, not std::call_once: libstdc++'s call_once keeps its callable
  // in TLS, whose dynamic blocks LeakSanitizer misreads at exit.)
  struct Opened {
    std::mutex mutex;
    bool tried[kKindCount] = {};
    DriverBackend* backend[kKindCount] = {};
  };
  static Opened* const opened = new Opened;  // never destroyed, like the backends
  const std::size_t i = kind_index(kind);
  std::lock_guard<std::mutex> lock(opened->mutex);
  if (!opened->tried[i]) {
    std::string reason;
    opened->backend[i] = open_driver_backend(kind, 0, &reason).release();
    opened->tried[i] = true;
  }
  return opened->backend[i];
}

DriverBackend* driver_backend_for(Kind kind, int device, std::string* reason) {
  if (device == 0) {
    DriverBackend* b = driver_backend_for(kind);
    if (b == nullptr && reason != nullptr) {
      std::string why;
      driver_backend(&why);  // why the selected driver is missing ("" when it is another kind's)
      *reason = std::string("no ") + kind_name(kind) + " driver backend" + (why.empty() ? "" : ": " + why);
    }
    return b;
  }
  if (kind == Kind::Host) {
    if (reason != nullptr) *reason = "host memory has no device ordinals";
    return nullptr;
  }
  if (const std::string choice = config::device_driver(); choice != "auto" && choice != kind_name(kind)) {
    if (reason != nullptr) *reason = "MATE_DEVICE_DRIVER=" + choice + " selects another driver";
    return nullptr;
  }
  // Opened once per ordinal and kept, like the process-wide backend (a mutex, not call_once: see
  // driver_backend_for(kind)).
  struct Opened {
    std::mutex mutex;
    std::map<std::pair<std::size_t, int>, std::pair<DriverBackend*, std::string>> by_device;
  };
  static Opened* const opened = new Opened;  // never destroyed, like the backends
  std::lock_guard<std::mutex> lock(opened->mutex);
  auto [it, first] = opened->by_device.try_emplace({kind_index(kind), device});
  if (first) it->second.first = open_driver_backend(kind, device, &it->second.second).release();
  if (it->second.first == nullptr && reason != nullptr) *reason = it->second.second;
  return it->second.first;
}

std::uint64_t device_memory_mapped_count(Kind kind) noexcept {
  if (kind == Kind::Host) return 0;
  return g_mapped_count[kind_index(kind)].load(std::memory_order_relaxed);
}

std::string device_backends_summary() {
  std::string choice;
  try {
    choice = config::device_driver();
  } catch (const config::ConfigError& e) {
    return std::string("host (mmap); device drivers: not probed (") + e.what() + ")";
  }
  std::string out = "host (mmap)";
  for (const Vendor& vendor : vendors()) {
    const Kind kind = vendor.kind;
    const char* name = vendor.name;
    out += std::string("; ") + name + " driver: ";
    if (choice != "auto" && choice != name) {
      out += "not used (MATE_DEVICE_DRIVER=" + choice + ")";
      continue;
    }
    const DriverProbe probe = probe_driver(kind);
    if (!probe.opened) {
      out += "not found (" + probe.reason + ")";
    } else if (!probe.loaded) {
      out += "unusable (" + probe.reason + ")";
    } else if (probe.devices.empty()) {
      out += probe.library + version_text(probe.driver_version) + ", no device (" + probe.reason + ")";
    } else {
      out += probe.library + version_text(probe.driver_version) + ", " +
             std::to_string(probe.devices.size()) + (probe.devices.size() == 1 ? " device (" : " devices (") +
             arch_list(probe.devices) + ")";
    }
  }
  return out;
}

std::string describe(const Backend& backend, Status status) {
  const char* what = status.what != nullptr ? status.what : "(no description)";
  if (status.ok()) return std::string(what) + ": success";
  if (const auto* d = dynamic_cast<const DriverBackend*>(&backend))
    return std::string(what) + ": " + d->error_name(status.code) + " (" + d->error_string(status.code) +
           ", code " + std::to_string(status.code) + ")";
  return std::string(what) + ": " + std::strerror(status.code) + " (errno " + std::to_string(status.code) + ")";
}

}  // namespace mate::device
