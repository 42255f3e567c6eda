// A fake CUDA / MUSA driver: the subset of the driver API that MATE's driver backend calls,
// implemented on host memory with real protections, exported under both prefixes (cu… and mu…).
//
// Device memory here is host memory, so a test's "kernel" is host code touching a device
// pointer, and touching what a real GPU would fault on faults here too:
//  * cuMemAddressReserve  → an anonymous PROT_NONE mapping (aligned to max(alignment, G));
//  * cuMemCreate          → a memfd of the requested size (the "physical memory");
//  * cuMemMap             → the memfd mapped MAP_FIXED into the reservation, still PROT_NONE;
//  * cuMemSetAccess       → mprotect to PROT_READ|PROT_WRITE (or read-only / none);
//  * cuMemUnmap           → a fresh PROT_NONE anonymous mapping over the range;
//  * cuMemRelease         → the memfd is closed once nothing maps it (as on the device, memory
//                           released while mapped lives until it is unmapped).
// Arguments are checked the way the real driver documents them: sizes and addresses must be
// multiples of the granularity G, a mapping must lie inside one reservation and not overlap
// another, unmap must cover whole mappings (no sub-range), copies must stay inside accessible
// mappings; violations return CUDA_ERROR_INVALID_VALUE (1). Where the real driver's behavior is
// unspecified the fake is stricter: freeing a reservation that still has mappings, or setting
// access on part of a mapping, fails.
//
// Graph capture: fake_driver_set_capture_status marks a stream as capturing; a synchronous
// cuMemcpyDtoH while any capture is active then fails (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
// and invalidates it (status 2), as on a real device.
//
// Configuration (read once, at the first call): FAKE_DRIVER_GRANULARITY (bytes, a power of two
// multiple of the page size; default 65536), FAKE_DRIVER_DEVICE_COUNT (default 1; 0 makes cuInit
// return CUDA_ERROR_NO_DEVICE), FAKE_DRIVER_COMPUTE_CAPABILITY (comma-separated major.minor per
// device, the last repeated; default 9.0). In-process tests use the fake_driver_* hooks below.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {

using Result = int;
using DevicePtr = unsigned long long;
using Handle = unsigned long long;

constexpr Result kSuccess = 0;
constexpr Result kInvalidValue = 1;
constexpr Result kOutOfMemory = 2;
constexpr Result kNotInitialized = 3;
constexpr Result kNoDevice = 100;
constexpr Result kInvalidDevice = 101;
constexpr Result kInvalidContext = 201;
constexpr Result kIllegalAddress = 700;
constexpr Result kStreamCaptureImplicit = 906;
constexpr Result kStreamCaptureUnsupported = 900;
constexpr Result kHostMemoryAlreadyRegistered = 712;
constexpr Result kHostMemoryNotRegistered = 713;

constexpr int kMaxDevices = 16;

struct MemLocation {
  int type;
  int id;
};
struct MemAllocationProp {
  int type;
  int requestedHandleTypes;
  MemLocation location;
  void* win32HandleMetaData;
  unsigned char allocFlags[8];
};
struct MemAccessDesc {
  MemLocation location;
  int flags;
};

struct Context {
  int device;
};

struct Physical {
  int fd = -1;
  std::size_t size = 0;
  int mappings = 0;
  bool released = false;
  int device = 0;  // the prop's location id at cuMemCreate
};

struct Mapping {
  std::size_t size = 0;
  Handle handle = 0;
  int prot = PROT_NONE;  // what cuMemSetAccess granted
};

struct State {
  std::mutex mutex;
  bool configured = false;
  std::size_t granularity = 64 * 1024;
  int device_count = 1;
  int major[kMaxDevices];
  int minor[kMaxDevices];
  Context contexts[kMaxDevices];
  int context_refs[kMaxDevices] = {};
  bool initialized = false;
  Result sticky_error = kSuccess;
  std::map<std::uintptr_t, std::size_t> reservations;  // base → size
  std::map<Handle, Physical> physicals;
  Handle next_handle = 1;
  std::map<std::uintptr_t, Mapping> mappings;  // address → mapping
  std::map<void*, int> capture_status;         // stream → CUstreamCaptureStatus
  std::map<void*, int> stream_devices;         // fake_driver_stream_on_device's streams → device
  // Host bookkeeping made by cuInit and grown by each context retain with realloc, as the real
  // driver does: under `mate guard-run` a program's cuInit (cudart calls it first) gets a guarded
  // block, which the guard's own set-up then sees reallocated from inside the driver.
  char* host_bookkeeping = nullptr;
  std::size_t host_bookkeeping_size = 0;
  // Page-locked host ranges (cuMemHostRegister): start → size. Copies count by whether their
  // host side lies in one, so a test sees that the guard's canary copies run from pinned memory.
  std::map<std::uintptr_t, std::size_t> pinned;
  long pinned_copies = 0;
  long pageable_copies = 0;
  long device_copies = 0;          // cuMemcpyDtoD
  long host_to_device_copies = 0;  // cuMemcpyHtoD
  long device_to_host_copies = 0;  // cuMemcpyDtoH
  Result host_register_error = kSuccess;  // set: cuMemHostRegister fails with it
};

State& state() {
  static State* s = new State;  // never destroyed: the fake may be called during exit
  return *s;
}

// initial-exec: static TLS, as vendor drivers use; no __tls_get_addr calls (LeakSanitizer misreads
// the dynamic TLS blocks of a dlopened library on this glibc and crashes at exit).
__attribute__((tls_model("initial-exec"))) thread_local Context* current_context = nullptr;

bool is_power_of_two(std::size_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Parses "9.0,8.6" into the per-device arrays; false when malformed.
bool set_archs(State& s, const char* text) {
  int index = 0;
  int major = 0, minor = 0;
  const char* p = text;
  while (*p != '\0' && index < kMaxDevices) {
    int consumed = 0;
    if (std::sscanf(p, "%d.%d%n", &major, &minor, &consumed) != 2) return false;
    s.major[index] = major;
    s.minor[index] = minor;
    ++index;
    p += consumed;
    if (*p == ',') ++p;
  }
  if (index == 0) return false;
  for (int i = index; i < kMaxDevices; ++i) {
    s.major[i] = major;
    s.minor[i] = minor;
  }
  return true;
}

void configure_locked(State& s) {
  if (s.configured) return;
  s.configured = true;
  for (int i = 0; i < kMaxDevices; ++i) s.contexts[i].device = i;
  set_archs(s, "9.0");
  // The fake is a test double, not MATE: it reads its own variables (see
  // scripts/env_reads_allowed.txt).
  if (const char* g = std::getenv("FAKE_DRIVER_GRANULARITY")) {
    const unsigned long long v = std::strtoull(g, nullptr, 10);
    if (is_power_of_two(v) && v % static_cast<unsigned long long>(sysconf(_SC_PAGESIZE)) == 0)
      s.granularity = v;
    else
      std::fprintf(stderr, "fake driver: ignoring FAKE_DRIVER_GRANULARITY=%s (want a power of "
                           "two multiple of the page size)\n", g);
  }
  if (const char* c = std::getenv("FAKE_DRIVER_DEVICE_COUNT")) {
    const long v = std::strtol(c, nullptr, 10);
    if (v >= 0 && v <= kMaxDevices) s.device_count = static_cast<int>(v);
  }
  if (const char* a = std::getenv("FAKE_DRIVER_COMPUTE_CAPABILITY")) {
    if (!set_archs(s, a)) {
      std::fprintf(stderr, "fake driver: ignoring FAKE_DRIVER_COMPUTE_CAPABILITY=%s\n", a);
      set_archs(s, "9.0");
    }
  }
}

// Locks the state, configured; every entry point starts with it.
struct Locked {
  std::lock_guard<std::mutex> lock;
  State& s;
  Locked() : lock(state().mutex), s(state()) { configure_locked(s); }
};

bool aligned(const State& s, std::uintptr_t v) { return (v & (s.granularity - 1)) == 0; }

// The reservation containing [addr, addr+size), or end().
std::map<std::uintptr_t, std::size_t>::iterator reservation_of(State& s, std::uintptr_t addr,
                                                               std::size_t size) {
  auto it = s.reservations.upper_bound(addr);
  if (it == s.reservations.begin()) return s.reservations.end();
  --it;
  if (addr + size > it->first + it->second) return s.reservations.end();
  return it;
}

bool overlaps_mapping(State& s, std::uintptr_t addr, std::size_t size) {
  auto it = s.mappings.upper_bound(addr);
  if (it != s.mappings.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size > addr) return true;
  }
  return it != s.mappings.end() && it->first < addr + size;
}

// Whether [addr, addr+size) is exactly a run of whole, contiguous mappings.
bool whole_mappings(State& s, std::uintptr_t addr, std::size_t size) {
  std::uintptr_t at = addr;
  const std::uintptr_t end = addr + size;
  while (at < end) {
    auto it = s.mappings.find(at);
    if (it == s.mappings.end()) return false;
    at += it->second.size;
  }
  return at == end;
}

// Whether [addr, addr+size) lies in mappings granted at least `prot`.
bool accessible(State& s, std::uintptr_t addr, std::size_t size, int prot) {
  std::uintptr_t at = addr;
  const std::uintptr_t end = addr + size;
  if (end < addr) return false;
  while (at < end) {
    auto it = s.mappings.upper_bound(at);
    if (it == s.mappings.begin()) return false;
    --it;
    if (it->first + it->second.size <= at) return false;
    if ((it->second.prot & prot) != prot) return false;
    at = it->first + it->second.size;
  }
  return true;
}

void drop_physical_if_unused(State& s, Handle handle) {
  auto it = s.physicals.find(handle);
  if (it == s.physicals.end()) return;
  if (it->second.released && it->second.mappings == 0) {
    close(it->second.fd);
    s.physicals.erase(it);
  }
}

// ---- the entry points, prefix-free ----

Result fake_Init(unsigned int flags) {
  Locked l;
  if (flags != 0) return kInvalidValue;
  if (l.s.device_count == 0) return kNoDevice;
  if (l.s.host_bookkeeping == nullptr) {
    l.s.host_bookkeeping_size = 1000;
    l.s.host_bookkeeping = static_cast<char*>(std::malloc(l.s.host_bookkeeping_size));
    if (l.s.host_bookkeeping == nullptr) return kOutOfMemory;
    std::memset(l.s.host_bookkeeping, 1, l.s.host_bookkeeping_size);
  }
  l.s.initialized = true;
  return kSuccess;
}

Result fake_DriverGetVersion(int* version) {
  if (version == nullptr) return kInvalidValue;
  *version = 13000;
  return kSuccess;
}

Result fake_DeviceGetCount(int* count) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (count == nullptr) return kInvalidValue;
  *count = l.s.device_count;
  return kSuccess;
}

Result fake_DeviceGet(int* device, int ordinal) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (device == nullptr) return kInvalidValue;
  if (ordinal < 0 || ordinal >= l.s.device_count) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

Result fake_DeviceGetAttribute(int* value, int attribute, int device) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (value == nullptr) return kInvalidValue;
  if (device < 0 || device >= l.s.device_count) return kInvalidDevice;
  if (attribute == 75) {
    *value = l.s.major[device];
  } else if (attribute == 76) {
    *value = l.s.minor[device];
  } else {
    return kInvalidValue;
  }
  return kSuccess;
}

Result fake_DevicePrimaryCtxRetain(void** ctx, int device) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (ctx == nullptr) return kInvalidValue;
  if (device < 0 || device >= l.s.device_count) return kInvalidDevice;
  const std::size_t grown = l.s.host_bookkeeping_size + 1000;
  char* bigger = static_cast<char*>(std::realloc(l.s.host_bookkeeping, grown));
  if (bigger == nullptr) return kOutOfMemory;
  std::memset(bigger + l.s.host_bookkeeping_size, 2, grown - l.s.host_bookkeeping_size);
  l.s.host_bookkeeping = bigger;
  l.s.host_bookkeeping_size = grown;
  ++l.s.context_refs[device];
  *ctx = &l.s.contexts[device];
  return kSuccess;
}

Result fake_DevicePrimaryCtxRelease_v2(int device) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (device < 0 || device >= l.s.device_count) return kInvalidDevice;
  if (l.s.context_refs[device] == 0) return kInvalidContext;
  --l.s.context_refs[device];
  return kSuccess;
}

Result fake_CtxGetCurrent(void** ctx) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (ctx == nullptr) return kInvalidValue;
  *ctx = current_context;
  return kSuccess;
}

Result fake_CtxSetCurrent(void* ctx) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (ctx != nullptr) {
    auto* c = static_cast<Context*>(ctx);
    if (c < l.s.contexts || c >= l.s.contexts + kMaxDevices) return kInvalidContext;
  }
  current_context = static_cast<Context*>(ctx);
  return kSuccess;
}

Result fake_CtxGetDevice(int* device) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (device == nullptr) return kInvalidValue;
  if (current_context == nullptr) return kInvalidContext;
  *device = static_cast<int>(current_context - l.s.contexts);
  return kSuccess;
}

// A stream made by fake_driver_stream_on_device belongs to that device's context; any other
// non-null handle is taken for a stream of the current context.
Result fake_StreamGetCtx(void* stream, void** ctx) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (ctx == nullptr) return kInvalidValue;
  auto it = l.s.stream_devices.find(stream);
  if (it != l.s.stream_devices.end()) {
    *ctx = &l.s.contexts[it->second];
    return kSuccess;
  }
  if (current_context == nullptr) return kInvalidContext;
  *ctx = current_context;
  return kSuccess;
}

Result fake_CtxSynchronize() {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (current_context == nullptr) return kInvalidContext;
  return l.s.sticky_error;  // a device fault stays reported, as on a real context
}

Result fake_MemGetAllocationGranularity(std::size_t* granularity, const MemAllocationProp* prop,
                                        int option) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (granularity == nullptr || prop == nullptr || (option != 0 && option != 1))
    return kInvalidValue;
  if (prop->type != 1 || prop->location.type != 1) return kInvalidValue;
  if (prop->location.id < 0 || prop->location.id >= l.s.device_count) return kInvalidDevice;
  *granularity = l.s.granularity;
  return kSuccess;
}

Result fake_MemAddressReserve(DevicePtr* ptr, std::size_t size, std::size_t alignment,
                              DevicePtr /*hint*/, unsigned long long flags) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (ptr == nullptr || size == 0 || !aligned(l.s, size) || flags != 0) return kInvalidValue;
  if (alignment != 0 && !is_power_of_two(alignment)) return kInvalidValue;
  const std::size_t align = alignment > l.s.granularity ? alignment : l.s.granularity;
  // Over-reserve, then trim to an aligned range.
  void* p = mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return kOutOfMemory;
  const auto raw = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t base = (raw + align - 1) & ~(static_cast<std::uintptr_t>(align) - 1);
  if (base > raw) munmap(p, base - raw);
  const std::uintptr_t tail = raw + size + align - (base + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(base + size), tail);
  l.s.reservations.emplace(base, size);
  *ptr = base;
  return kSuccess;
}

Result fake_MemAddressFree(DevicePtr ptr, std::size_t size) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  auto it = l.s.reservations.find(ptr);
  if (it == l.s.reservations.end() || it->second != size) return kInvalidValue;
  if (overlaps_mapping(l.s, ptr, size)) return kInvalidValue;  // stricter than the driver
  munmap(reinterpret_cast<void*>(ptr), size);
  l.s.reservations.erase(it);
  return kSuccess;
}

Result fake_MemCreate(Handle* handle, std::size_t size, const MemAllocationProp* prop,
                      unsigned long long flags) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (handle == nullptr || prop == nullptr || flags != 0 || size == 0 || !aligned(l.s, size))
    return kInvalidValue;
  if (prop->type != 1 || prop->location.type != 1 || prop->requestedHandleTypes != 0)
    return kInvalidValue;
  if (prop->location.id < 0 || prop->location.id >= l.s.device_count) return kInvalidDevice;
  const int fd = memfd_create("fake-device-memory", MFD_CLOEXEC);
  if (fd < 0) return kOutOfMemory;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return kOutOfMemory;
  }
  const Handle h = l.s.next_handle++;
  Physical physical;
  physical.fd = fd;
  physical.size = size;
  physical.device = prop->location.id;
  l.s.physicals.emplace(h, physical);
  *handle = h;
  return kSuccess;
}

Result fake_MemRelease(Handle handle) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  auto it = l.s.physicals.find(handle);
  if (it == l.s.physicals.end() || it->second.released) return kInvalidValue;
  it->second.released = true;
  drop_physical_if_unused(l.s, handle);
  return kSuccess;
}

Result fake_MemMap(DevicePtr ptr, std::size_t size, std::size_t offset, Handle handle,
                   unsigned long long flags) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (flags != 0 || size == 0 || !aligned(l.s, ptr) || !aligned(l.s, size) ||
      !aligned(l.s, offset))
    return kInvalidValue;
  auto phys = l.s.physicals.find(handle);
  if (phys == l.s.physicals.end() || phys->second.released) return kInvalidValue;
  if (offset + size > phys->second.size) return kInvalidValue;
  if (reservation_of(l.s, ptr, size) == l.s.reservations.end()) return kInvalidValue;
  if (overlaps_mapping(l.s, ptr, size)) return kInvalidValue;
  // Mapped but not yet accessible: cuMemSetAccess grants access.
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                 phys->second.fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) return kOutOfMemory;
  l.s.mappings.emplace(ptr, Mapping{size, handle, PROT_NONE});
  ++phys->second.mappings;
  return kSuccess;
}

Result fake_MemUnmap(DevicePtr ptr, std::size_t size) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (size == 0 || !aligned(l.s, ptr) || !aligned(l.s, size)) return kInvalidValue;
  if (!whole_mappings(l.s, ptr, size)) return kInvalidValue;  // no sub-range unmap
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) return kOutOfMemory;
  std::uintptr_t at = ptr;
  while (at < ptr + size) {
    auto it = l.s.mappings.find(at);
    const Handle handle = it->second.handle;
    at += it->second.size;
    l.s.mappings.erase(it);
    --l.s.physicals[handle].mappings;
    drop_physical_if_unused(l.s, handle);
  }
  return kSuccess;
}

Result fake_MemSetAccess(DevicePtr ptr, std::size_t size, const MemAccessDesc* desc,
                         std::size_t count) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (desc == nullptr || count == 0 || size == 0 || !aligned(l.s, ptr) || !aligned(l.s, size))
    return kInvalidValue;
  if (!whole_mappings(l.s, ptr, size)) return kInvalidValue;
  int prot = PROT_NONE;
  for (std::size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != 1) return kInvalidValue;
    if (desc[i].location.id < 0 || desc[i].location.id >= l.s.device_count) return kInvalidDevice;
    switch (desc[i].flags) {
      case 0: prot = PROT_NONE; break;
      case 1: prot = PROT_READ; break;
      case 3: prot = PROT_READ | PROT_WRITE; break;
      default: return kInvalidValue;
    }
  }
  if (mprotect(reinterpret_cast<void*>(ptr), size, prot) != 0) return kInvalidValue;
  for (std::uintptr_t at = ptr; at < ptr + size;) {
    Mapping& m = l.s.mappings[at];
    m.prot = prot;
    at += m.size;
  }
  return kSuccess;
}

// Counts a copy whose host side is [host, host + bytes) as pinned or pageable.
void count_copy(State& s, const void* host, std::size_t bytes) {
  const auto a = reinterpret_cast<std::uintptr_t>(host);
  auto it = s.pinned.upper_bound(a);
  const bool pinned = it != s.pinned.begin() && a + bytes <= std::prev(it)->first + std::prev(it)->second;
  (pinned ? s.pinned_copies : s.pageable_copies) += 1;
}

Result fake_MemHostRegister_v2(void* host, std::size_t bytes, unsigned int flags) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (current_context == nullptr) return kInvalidContext;
  if (host == nullptr || bytes == 0 || flags > 0xf) return kInvalidValue;
  if (l.s.host_register_error != kSuccess) return l.s.host_register_error;
  const auto a = reinterpret_cast<std::uintptr_t>(host);
  auto it = l.s.pinned.upper_bound(a);
  if ((it != l.s.pinned.end() && it->first < a + bytes) ||
      (it != l.s.pinned.begin() && std::prev(it)->first + std::prev(it)->second > a))
    return kHostMemoryAlreadyRegistered;
  l.s.pinned.emplace(a, bytes);
  return kSuccess;
}

Result fake_MemHostUnregister(void* host) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (current_context == nullptr) return kInvalidContext;
  if (l.s.pinned.erase(reinterpret_cast<std::uintptr_t>(host)) == 0) return kHostMemoryNotRegistered;
  return kSuccess;
}

Result fake_MemcpyDtoD_v2(DevicePtr dst, DevicePtr src, std::size_t bytes) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (current_context == nullptr) return kInvalidContext;
  if (l.s.sticky_error != kSuccess) return l.s.sticky_error;
  if (bytes == 0) return kSuccess;
  if (!accessible(l.s, src, bytes, PROT_READ) || !accessible(l.s, dst, bytes, PROT_WRITE)) return kInvalidValue;
  l.s.device_copies += 1;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}

// The fake runs every copy at once: synchronizing a stream only reports the sticky error.
Result fake_StreamSynchronize(void* stream) {
  (void)stream;
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (current_context == nullptr) return kInvalidContext;
  return l.s.sticky_error;
}

Result fake_MemcpyHtoD_v2(DevicePtr dst, const void* src, std::size_t bytes) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (current_context == nullptr) return kInvalidContext;
  if (l.s.sticky_error != kSuccess) return l.s.sticky_error;  // every later call fails, as on a real context
  if (bytes == 0) return kSuccess;
  if (src == nullptr || !accessible(l.s, dst, bytes, PROT_WRITE)) return kInvalidValue;
  count_copy(l.s, src, bytes);
  l.s.host_to_device_copies += 1;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return kSuccess;
}

Result fake_MemcpyDtoH_v2(void* dst, DevicePtr src, std::size_t bytes) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (current_context == nullptr) return kInvalidContext;
  if (l.s.sticky_error != kSuccess) return l.s.sticky_error;  // every later call fails, as on a real context
  // A synchronous copy while a (global-mode) capture is active is not allowed: the real driver
  // fails it and invalidates the capture, which then cannot be instantiated.
  bool broke_a_capture = false;
  for (auto& [stream, capture] : l.s.capture_status)
    if (capture == 1) capture = 2, broke_a_capture = true;
  if (broke_a_capture) return kStreamCaptureUnsupported;
  if (bytes == 0) return kSuccess;
  if (dst == nullptr || !accessible(l.s, src, bytes, PROT_READ)) return kInvalidValue;
  count_copy(l.s, dst, bytes);
  l.s.device_to_host_copies += 1;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}

Result fake_MemsetD8_v2(DevicePtr dst, unsigned char value, std::size_t bytes) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (current_context == nullptr) return kInvalidContext;
  if (l.s.sticky_error != kSuccess) return l.s.sticky_error;  // every later call fails, as on a real context
  if (bytes == 0) return kSuccess;
  if (!accessible(l.s, dst, bytes, PROT_WRITE)) return kInvalidValue;
  std::memset(reinterpret_cast<void*>(dst), value, bytes);
  return kSuccess;
}

Result fake_StreamIsCapturing(void* stream, int* status) {
  Locked l;
  if (!l.s.initialized) return kNotInitialized;
  if (current_context == nullptr) return kInvalidContext;
  if (status == nullptr) return kInvalidValue;
  if (stream == nullptr) {
    // The legacy stream while another stream captures (the fake treats every stream as
    // blocking): the real driver answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT.
    for (const auto& [other, capture] : l.s.capture_status)
      if (other != nullptr && capture == 1) return kStreamCaptureImplicit;
  }
  auto it = l.s.capture_status.find(stream);
  *status = it == l.s.capture_status.end() ? 0 : it->second;
  return kSuccess;
}

struct ErrorText {
  Result code;
  const char* cuda_name;
  const char* musa_name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {kSuccess, "CUDA_SUCCESS", "MUSA_SUCCESS", "no error"},
    {kInvalidValue, "CUDA_ERROR_INVALID_VALUE", "MUSA_ERROR_INVALID_VALUE", "invalid argument"},
    {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "MUSA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED", "MUSA_ERROR_NOT_INITIALIZED",
     "initialization error"},
    {kNoDevice, "CUDA_ERROR_NO_DEVICE", "MUSA_ERROR_NO_DEVICE",
     "no CUDA-capable device is detected"},
    {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "MUSA_ERROR_INVALID_DEVICE",
     "invalid device ordinal"},
    {kInvalidContext, "CUDA_ERROR_INVALID_CONTEXT", "MUSA_ERROR_INVALID_CONTEXT",
     "invalid device context"},
    {kIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS", "MUSA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {kStreamCaptureUnsupported, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "MUSA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {kHostMemoryAlreadyRegistered, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "MUSA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
    {kHostMemoryNotRegistered, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "MUSA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {kStreamCaptureImplicit, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "MUSA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
};

Result error_text(Result code, bool musa, bool name, const char** out) {
  if (out == nullptr) return kInvalidValue;
  for (const ErrorText& e : kErrors) {
    if (e.code == code) {
      *out = name ? (musa ? e.musa_name : e.cuda_name) : e.text;
      return kSuccess;
    }
  }
  *out = nullptr;
  return kInvalidValue;
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

// Exports fake_<name> as cu<name> and mu<name>.
#define FAKE_BOTH(name, params, args)                             \
  FAKE_EXPORT Result cu##name params { return fake_##name args; } \
  FAKE_EXPORT Result mu##name params { return fake_##name args; }

FAKE_BOTH(Init, (unsigned int flags), (flags))
FAKE_BOTH(DriverGetVersion, (int* version), (version))
FAKE_BOTH(DeviceGetCount, (int* count), (count))
FAKE_BOTH(DeviceGet, (int* device, int ordinal), (device, ordinal))
FAKE_BOTH(DeviceGetAttribute, (int* value, int attribute, int device), (value, attribute, device))
FAKE_BOTH(DevicePrimaryCtxRetain, (void** ctx, int device), (ctx, device))
FAKE_BOTH(DevicePrimaryCtxRelease_v2, (int device), (device))
FAKE_BOTH(CtxGetCurrent, (void** ctx), (ctx))
FAKE_BOTH(CtxSetCurrent, (void* ctx), (ctx))
FAKE_BOTH(CtxGetDevice, (int* device), (device))
FAKE_BOTH(StreamGetCtx, (void* stream, void** ctx), (stream, ctx))
FAKE_BOTH(CtxSynchronize, (), ())
FAKE_BOTH(MemGetAllocationGranularity,
          (std::size_t * granularity, const MemAllocationProp* prop, int option),
          (granularity, prop, option))
FAKE_BOTH(MemAddressReserve,
          (DevicePtr * ptr, std::size_t size, std::size_t alignment, DevicePtr hint,
           unsigned long long flags),
          (ptr, size, alignment, hint, flags))
FAKE_BOTH(MemAddressFree, (DevicePtr ptr, std::size_t size), (ptr, size))
FAKE_BOTH(MemCreate,
          (Handle * handle, std::size_t size, const MemAllocationProp* prop,
           unsigned long long flags),
          (handle, size, prop, flags))
FAKE_BOTH(MemRelease, (Handle handle), (handle))
FAKE_BOTH(MemMap,
          (DevicePtr ptr, std::size_t size, std::size_t offset, Handle handle,
           unsigned long long flags),
          (ptr, size, offset, handle, flags))
FAKE_BOTH(MemUnmap, (DevicePtr ptr, std::size_t size), (ptr, size))
FAKE_BOTH(MemSetAccess,
          (DevicePtr ptr, std::size_t size, const MemAccessDesc* desc, std::size_t count),
          (ptr, size, desc, count))
FAKE_BOTH(MemcpyHtoD_v2, (DevicePtr dst, const void* src, std::size_t bytes), (dst, src, bytes))
FAKE_BOTH(MemcpyDtoH_v2, (void* dst, DevicePtr src, std::size_t bytes), (dst, src, bytes))
FAKE_BOTH(MemsetD8_v2, (DevicePtr dst, unsigned char value, std::size_t bytes),
          (dst, value, bytes))
FAKE_BOTH(StreamIsCapturing, (void* stream, int* status), (stream, status))
FAKE_BOTH(MemHostRegister_v2, (void* host, std::size_t bytes, unsigned int flags), (host, bytes, flags))
FAKE_BOTH(MemHostUnregister, (void* host), (host))
FAKE_BOTH(MemcpyDtoD_v2, (DevicePtr dst, DevicePtr src, std::size_t bytes), (dst, src, bytes))
FAKE_BOTH(StreamSynchronize, (void* stream), (stream))

FAKE_EXPORT Result cuGetErrorName(Result code, const char** out) {
  return error_text(code, false, true, out);
}
FAKE_EXPORT Result muGetErrorName(Result code, const char** out) {
  return error_text(code, true, true, out);
}
FAKE_EXPORT Result cuGetErrorString(Result code, const char** out) {
  return error_text(code, false, false, out);
}
FAKE_EXPORT Result muGetErrorString(Result code, const char** out) {
  return error_text(code, true, false, out);
}

// ---- test hooks (not driver API) ----

// Sets the allocation granularity (a power of two multiple of the page size); returns 0, or -1
// when rejected or while anything is reserved.
FAKE_EXPORT int fake_driver_set_granularity(std::size_t bytes) {
  Locked l;
  if (!is_power_of_two(bytes) || bytes % static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) != 0)
    return -1;
  if (!l.s.reservations.empty()) return -1;
  l.s.granularity = bytes;
  return 0;
}

// Sets the number of devices and their compute capabilities ("9.0,8.6", the last repeated).
// Returns 0, or -1 for a bad count or list.
FAKE_EXPORT int fake_driver_set_devices(int count, const char* archs) {
  Locked l;
  if (count < 0 || count > kMaxDevices) return -1;
  if (archs != nullptr && !set_archs(l.s, archs)) return -1;
  l.s.device_count = count;
  if (count == 0) l.s.initialized = false;
  return 0;
}

// Sets what cuStreamIsCapturing reports for `stream` (0 none, 1 active, 2 invalidated).
FAKE_EXPORT void fake_driver_set_capture_status(void* stream, int status) {
  Locked l;
  l.s.capture_status[stream] = status;
}

// What cuStreamIsCapturing would report for `stream` (0 none, 1 active, 2 invalidated), without
// a context: a test checks that a capture was left intact.
FAKE_EXPORT int fake_driver_capture_status(void* stream) {
  Locked l;
  auto it = l.s.capture_status.find(stream);
  return it == l.s.capture_status.end() ? 0 : it->second;
}

// Sets the sticky error cuCtxSynchronize and the copies/memset return (e.g. 700,
// CUDA_ERROR_ILLEGAL_ADDRESS, to stand for a device fault); 0 clears it.
FAKE_EXPORT void fake_driver_set_sticky_error(int code) {
  Locked l;
  l.s.sticky_error = code;
}

// Page-locked host memory: ranges registered now, and copies made so far from/to pinned and
// pageable host memory.
FAKE_EXPORT void fake_driver_pinned(int* ranges, long* pinned_copies, long* pageable_copies) {
  Locked l;
  *ranges = static_cast<int>(l.s.pinned.size());
  *pinned_copies = l.s.pinned_copies;
  *pageable_copies = l.s.pageable_copies;
}

// Copies made so far, by direction (cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyDtoD).
FAKE_EXPORT void fake_driver_copies(long* host_to_device, long* device_to_host, long* device_to_device) {
  Locked l;
  *host_to_device = l.s.host_to_device_copies;
  *device_to_host = l.s.device_to_host_copies;
  *device_to_device = l.s.device_copies;
}

// Makes cuMemHostRegister fail with `code` (e.g. 2, out of memory: page-locked memory is
// limited); 0 restores it.
FAKE_EXPORT void fake_driver_set_host_register_error(int code) {
  Locked l;
  l.s.host_register_error = code;
}

// How many references device `device`'s primary context has (cuDevicePrimaryCtxRetain less
// releases): whether anything made a context on a device.
FAKE_EXPORT int fake_driver_context_refs(int device) {
  Locked l;
  if (device < 0 || device >= l.s.device_count) return -1;
  return l.s.context_refs[device];
}

// A stream handle of device `device` (for cuStreamGetCtx: a stream made on that device's
// context); nullptr for a device the fake does not have.
FAKE_EXPORT void* fake_driver_stream_on_device(int device) {
  Locked l;
  if (device < 0 || device >= l.s.device_count) return nullptr;
  static char handles[kMaxDevices];  // one distinct address per device, never dereferenced
  l.s.stream_devices[&handles[device]] = device;
  return &handles[device];
}

// The device whose physical memory is mapped at `address` (tests of which device an allocation
// was made on); -1 when nothing is mapped there.
FAKE_EXPORT int fake_driver_device_of(unsigned long long address) {
  Locked l;
  auto it = l.s.mappings.upper_bound(static_cast<std::uintptr_t>(address));
  if (it == l.s.mappings.begin()) return -1;
  --it;
  if (address >= it->first + it->second.size) return -1;
  return l.s.physicals.at(it->second.handle).device;
}

// Live objects, for leak checks: reservations, physical allocations, mappings.
FAKE_EXPORT void fake_driver_counts(int* reservations, int* physicals, int* mappings) {
  Locked l;
  *reservations = static_cast<int>(l.s.reservations.size());
  *physicals = static_cast<int>(l.s.physicals.size());
  *mappings = static_cast<int>(l.s.mappings.size());
}
