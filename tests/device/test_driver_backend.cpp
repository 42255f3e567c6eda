// The driver backend through the fake driver (tests/fake_driver), once per symbol prefix (cu…
// and mu…): the virtual-memory operations, the errors they surface, real faults when host code
// (the tests' "kernel") touches unmapped device addresses, device and arch queries, the choice
// of driver, and a missing driver reported as a reason rather than a crash.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "mate/config.hpp"
#include "mate/core/signal_safe_format.hpp"
#include "mate/device/driver.hpp"
#include "mate/device/vendors.hpp"
#include "subprocess.hpp"

namespace mate::device {
// Readable parameters in gtest's messages.
void PrintTo(Kind kind, std::ostream* os) {
  *os << kind_name(kind);
}
}  // namespace mate::device

namespace {

using mate::config::ScopedOverride;
using mate::config::Var;
using mate::device::DeviceArch;
using mate::device::DriverBackend;
using mate::device::Kind;
using mate::device::Status;
using ::testing::HasSubstr;

constexpr std::size_t kDefaultGranularity = 64 * 1024;

// The fake's test hooks and a few of its entry points, called directly.
struct Fake {
  int (*set_granularity)(std::size_t);
  int (*set_devices)(int, const char*);
  void (*set_capture_status)(void*, int);
  void (*set_sticky_error)(int);
  void (*counts)(int*, int*, int*);
  int (*cu_ctx_get_current)(void**);
  int (*cu_mem_map)(unsigned long long, std::size_t, std::size_t, unsigned long long,
                    unsigned long long);
  int (*mu_mem_unmap)(unsigned long long, std::size_t);
  int (*cu_mem_set_access)(unsigned long long, std::size_t, const void*, std::size_t);
};

template <class F>
void bind(void* handle, const char* name, F* out) {
  void* p = dlsym(handle, name);
  ASSERT_NE(p, nullptr) << name << ": " << dlerror();
  *out = reinterpret_cast<F>(p);
}

const Fake& fake() {
  static Fake f = [] {
    Fake r{};
    // The same path the backend opens, so both see one instance of the fake.
    void* h = dlopen(MATE_FAKE_DRIVER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << dlerror();
    if (h == nullptr) return r;
    bind(h, "fake_driver_set_granularity", &r.set_granularity);
    bind(h, "fake_driver_set_devices", &r.set_devices);
    bind(h, "fake_driver_set_capture_status", &r.set_capture_status);
    bind(h, "fake_driver_set_sticky_error", &r.set_sticky_error);
    bind(h, "fake_driver_counts", &r.counts);
    bind(h, "cuCtxGetCurrent", &r.cu_ctx_get_current);
    bind(h, "cuMemMap", &r.cu_mem_map);
    bind(h, "muMemUnmap", &r.mu_mem_unmap);
    bind(h, "cuMemSetAccess", &r.cu_mem_set_access);
    return r;
  }();
  return f;
}

// A "kernel": host code touching device memory directly, as a GPU kernel would.
void kernel_store(std::uintptr_t address, char value) {
  *reinterpret_cast<volatile char*>(address) = value;
}
char kernel_load(std::uintptr_t address) { return *reinterpret_cast<volatile char*>(address); }

// In a death-test child: report the faulting address and exit with 42, so the test checks the
// fault happened exactly where expected (with or without sanitizers, which own SIGSEGV).
void report_fault(int, siginfo_t* info, void*) {
  char text[48] = "fault at 0x";
  std::strcat(text, mate::core::hex_text(reinterpret_cast<std::uintptr_t>(info->si_addr)).c_str());
  std::strcat(text, "\n");
  ssize_t ignored = write(2, text, std::strlen(text));
  (void)ignored;
  _exit(42);
}

void catch_faults() {
  struct sigaction sa {};
  sa.sa_sigaction = report_fault;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

std::string fault_at(std::uintptr_t address) {
  char text[40];
  std::snprintf(text, sizeof text, "fault at 0x%llx", static_cast<unsigned long long>(address));
  return text;
}

class FakeDriverBackend : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    ASSERT_NE(fake().set_granularity, nullptr);
    ASSERT_EQ(fake().set_granularity(kDefaultGranularity), 0);
    ASSERT_EQ(fake().set_devices(1, "9.0"), 0);
    fake().set_sticky_error(0);
  }

  void TearDown() override {
    // Everything a test made was given back: no reservation, memory or mapping leaks.
    int reservations = -1, physicals = -1, mappings = -1;
    fake().counts(&reservations, &physicals, &mappings);
    EXPECT_EQ(reservations, 0);
    EXPECT_EQ(physicals, 0);
    EXPECT_EQ(mappings, 0);
  }

  std::unique_ptr<DriverBackend> open(int device = 0) {
    std::string reason;
    auto backend = mate::device::open_driver_backend(GetParam(), device, &reason);
    EXPECT_NE(backend, nullptr) << reason;
    return backend;
  }

  // open(), then two granules reserved and the first mapped: [*base, *base + *g) usable, the next
  // granule unmapped. nullptr when a step failed (the failure is reported).
  std::unique_ptr<DriverBackend> open_mapped(std::size_t* g, std::uintptr_t* base) {
    auto b = open();
    if (b == nullptr) return nullptr;
    *g = b->granularity();
    if (Status s = b->reserve(2 * *g, base); !s.ok()) {
      ADD_FAILURE() << "reserve: " << s.what;
      return nullptr;
    }
    if (Status s = b->map(*base, *g); !s.ok()) {
      ADD_FAILURE() << "map: " << s.what;
      b->release(*base, 2 * *g);
      return nullptr;
    }
    return b;
  }

  const char* error_prefix() const { return GetParam() == Kind::Musa ? "MUSA_" : "CUDA_"; }
  const char* call_prefix() const { return GetParam() == Kind::Musa ? "mu" : "cu"; }

  ScopedOverride fake_path_{Var::MATE_FAKE_DRIVER_PATH, MATE_FAKE_DRIVER_LIBRARY};
};

TEST_P(FakeDriverBackend, Properties) {
  auto b = open();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->kind(), GetParam());
  EXPECT_STREQ(b->name(), GetParam() == Kind::Musa ? "musa" : "cuda");
  EXPECT_EQ(b->granularity(), kDefaultGranularity);
  EXPECT_EQ(b->default_alignment(), 256u);
  EXPECT_EQ(b->device(), 0);
  EXPECT_EQ(b->arch(), (DeviceArch{9, 0}));
  EXPECT_STREQ(b->library(), MATE_FAKE_DRIVER_LIBRARY);
}

TEST_P(FakeDriverBackend, ReserveMapWriteReadFillUnmapRelease) {
  auto b = open();
  ASSERT_NE(b, nullptr);
  const std::size_t g = b->granularity();
  std::uintptr_t base = 0;
  ASSERT_TRUE(b->reserve(4 * g, &base).ok());
  EXPECT_EQ(base % g, 0u);
  ASSERT_TRUE(b->map(base + g, 2 * g).ok());

  const char msg[] = "device bytes";
  ASSERT_TRUE(b->write(base + g, msg, sizeof msg).ok());
  char back[sizeof msg] = {};
  ASSERT_TRUE(b->read(back, base + g, sizeof msg).ok());
  EXPECT_STREQ(back, msg);

  // A fill across the two granules of the mapping, then a kernel reading it.
  ASSERT_TRUE(b->fill(base + 2 * g - 8, 0xAB, 16).ok());
  EXPECT_EQ(static_cast<unsigned char>(kernel_load(base + 2 * g - 8)), 0xAB);
  EXPECT_EQ(static_cast<unsigned char>(kernel_load(base + 2 * g + 7)), 0xAB);
  EXPECT_EQ(kernel_load(base + 2 * g + 8), 0);  // fresh memory is zero

  // A kernel's store is visible to a copy back.
  kernel_store(base + 3 * g - 1, 'k');
  char last = 0;
  ASSERT_TRUE(b->read(&last, base + 3 * g - 1, 1).ok());
  EXPECT_EQ(last, 'k');

  ASSERT_TRUE(b->unmap(base + g, 2 * g).ok());
  // Mapping again gives fresh memory.
  ASSERT_TRUE(b->map(base + g, g).ok());
  EXPECT_EQ(kernel_load(base + g), 0);
  ASSERT_TRUE(b->unmap(base + g, g).ok());
  ASSERT_TRUE(b->release(base, 4 * g).ok());
}

TEST_P(FakeDriverBackend, GranularityComesFromTheDriver) {
  ASSERT_EQ(fake().set_granularity(2 * 1024 * 1024), 0);
  auto b = open();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->granularity(), 2u * 1024 * 1024);
  std::uintptr_t base = 0;
  const Status s = b->reserve(kDefaultGranularity, &base);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.what, HasSubstr("multiple of the device allocation granularity"));
  ASSERT_TRUE(b->reserve(4u * 1024 * 1024, &base).ok());
  EXPECT_EQ(base % (2u * 1024 * 1024), 0u);
  ASSERT_TRUE(b->release(base, 4u * 1024 * 1024).ok());
}

TEST_P(FakeDriverBackend, MisuseIsAStatusWithAClearWhat) {
  auto b = open();
  ASSERT_NE(b, nullptr);
  const std::size_t g = b->granularity();
  std::uintptr_t base = 0;
  ASSERT_TRUE(b->reserve(4 * g, &base).ok());

  Status s = b->map(base + 4096, g);
  EXPECT_EQ(s.code, 1);
  EXPECT_THAT(s.what, HasSubstr("map: address and size must be non-zero multiples"));
  EXPECT_THAT(mate::device::describe(*b, s),
              HasSubstr(std::string(error_prefix()) + "ERROR_INVALID_VALUE (invalid argument"));

  s = b->map(base, g + 4096);
  EXPECT_EQ(s.code, 1);

  ASSERT_TRUE(b->map(base, 2 * g).ok());
  s = b->unmap(base, g);  // a sub-range
  EXPECT_EQ(s.code, 1);
  EXPECT_THAT(s.what, HasSubstr("cannot unmap a sub-range"));
  s = b->release(base, 4 * g);  // still mapped
  EXPECT_EQ(s.code, 1);
  EXPECT_THAT(s.what, HasSubstr("unmap it first"));

  // Copies outside mapped memory fail in the driver, named by the driver call.
  char byte = 0;
  s = b->write(base + 2 * g, &byte, 1);
  EXPECT_EQ(s.code, 1);
  EXPECT_EQ(std::string(s.what), std::string(call_prefix()) + "MemcpyHtoD_v2");
  s = b->read(&byte, base + 2 * g - 1, 2);  // straddles the end of the mapping
  EXPECT_EQ(std::string(s.what), std::string(call_prefix()) + "MemcpyDtoH_v2");
  s = b->fill(base + 3 * g, 0, 1);
  EXPECT_EQ(std::string(s.what), std::string(call_prefix()) + "MemsetD8_v2");

  // Mapping over a live mapping fails in the driver.
  s = b->map(base + g, 2 * g);
  EXPECT_EQ(s.code, 1);
  EXPECT_EQ(std::string(s.what), std::string(call_prefix()) + "MemMap");

  ASSERT_TRUE(b->unmap(base, 2 * g).ok());
  ASSERT_TRUE(b->release(base, 4 * g).ok());
}

// The fake itself refuses what the real driver refuses, whatever the caller (here: direct
// calls that bypass the backend's own checks).
TEST_P(FakeDriverBackend, FakeRejectsMisalignedMapsAndSubRangeUnmaps) {
  auto b = open();
  ASSERT_NE(b, nullptr);
  const std::size_t g = b->granularity();
  std::uintptr_t base = 0;
  ASSERT_TRUE(b->reserve(4 * g, &base).ok());
  ASSERT_TRUE(b->map(base, 2 * g).ok());
  EXPECT_EQ(fake().mu_mem_unmap(base, g), 1);           // a sub-range
  EXPECT_EQ(fake().mu_mem_unmap(base + g, g), 1);       // the tail half
  EXPECT_EQ(fake().cu_mem_map(base + 2 * g + 4096, g, 0, 1, 0), 1);  // misaligned
  EXPECT_EQ(fake().cu_mem_map(base + 3 * g, g, 0, 999999, 0), 1);    // unknown handle
  ASSERT_TRUE(b->unmap(base, 2 * g).ok());
  ASSERT_TRUE(b->release(base, 4 * g).ok());
}

TEST_P(FakeDriverBackend, KernelTouchingAReservedGranuleFaults) {
  std::size_t g = 0;
  std::uintptr_t base = 0;
  auto b = open_mapped(&g, &base);
  ASSERT_NE(b, nullptr);
  kernel_store(base + g - 1, 1);  // the last mapped byte is fine
  // One byte past the mapping: the guard granule.
  EXPECT_EXIT((catch_faults(), kernel_store(base + g, 1)), ::testing::ExitedWithCode(42),
              fault_at(base + g));
  EXPECT_EXIT((catch_faults(), (void)kernel_load(base + 2 * g - 1)),
              ::testing::ExitedWithCode(42), fault_at(base + 2 * g - 1));
  ASSERT_TRUE(b->unmap(base, g).ok());
  // Unmapped memory faults again.
  EXPECT_EXIT((catch_faults(), (void)kernel_load(base + 100)), ::testing::ExitedWithCode(42),
              fault_at(base + 100));
  ASSERT_TRUE(b->release(base, 2 * g).ok());
}

TEST_P(FakeDriverBackend, MappedButNoAccessGrantedFaults) {
  std::size_t g = 0;
  std::uintptr_t base = 0;
  auto b = open_mapped(&g, &base);
  ASSERT_NE(b, nullptr);
  // Revoke access through the driver API directly: the mapping stays, access goes.
  struct {
    int type, id, flags;
  } none{1, 0, 0};
  ASSERT_EQ(fake().cu_mem_set_access(base, g, &none, 1), 0);
  EXPECT_EXIT((catch_faults(), (void)kernel_load(base + 8)), ::testing::ExitedWithCode(42),
              fault_at(base + 8));
  char byte = 0;
  EXPECT_EQ(b->read(&byte, base, 1).code, 1);  // copies need access too
  ASSERT_TRUE(b->unmap(base, g).ok());
  ASSERT_TRUE(b->release(base, 2 * g).ok());
}

TEST_P(FakeDriverBackend, DeviceCountAndArchitectures) {
  ASSERT_EQ(fake().set_devices(3, "9.0,8.6,10.0"), 0);
  const auto probe = mate::device::probe_driver(GetParam());
  EXPECT_TRUE(probe.opened);
  EXPECT_TRUE(probe.loaded) << probe.reason;
  EXPECT_EQ(probe.library, MATE_FAKE_DRIVER_LIBRARY);
  EXPECT_EQ(probe.driver_version, 13000);
  ASSERT_EQ(probe.devices.size(), 3u);
  EXPECT_EQ(probe.devices[1], (DeviceArch{8, 6}));
  EXPECT_EQ(mate::device::to_string(probe.devices[2]), "10.0");
  EXPECT_EQ(mate::device::visible_device_archs(GetParam()), probe.devices);

  auto third = open(2);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->device(), 2);
  EXPECT_EQ(third->arch(), (DeviceArch{10, 0}));

  std::string reason;
  EXPECT_EQ(mate::device::open_driver_backend(GetParam(), 3, &reason), nullptr);
  EXPECT_THAT(reason, HasSubstr("device 3 requested but the driver sees 3 device(s)"));
}

TEST_P(FakeDriverBackend, NoDeviceIsAReasonNotACrash) {
  ASSERT_EQ(fake().set_devices(0, nullptr), 0);
  const auto probe = mate::device::probe_driver(GetParam());
  EXPECT_TRUE(probe.loaded);
  EXPECT_TRUE(probe.devices.empty());
  EXPECT_THAT(probe.reason, HasSubstr("ERROR_NO_DEVICE"));
  std::string reason;
  EXPECT_EQ(mate::device::open_driver_backend(GetParam(), 0, &reason), nullptr);
  EXPECT_THAT(reason, HasSubstr("Init: "));
  EXPECT_THAT(reason, HasSubstr("ERROR_NO_DEVICE"));
  EXPECT_TRUE(mate::device::visible_device_archs(GetParam()).empty());
}

TEST_P(FakeDriverBackend, StreamCaptureIsReported) {
  auto b = open();
  ASSERT_NE(b, nullptr);
  void* stream = reinterpret_cast<void*>(0x1234);
  bool capturing = true;
  ASSERT_TRUE(b->is_capturing(stream, &capturing).ok());
  EXPECT_FALSE(capturing);
  fake().set_capture_status(stream, 1);
  ASSERT_TRUE(b->is_capturing(stream, &capturing).ok());
  EXPECT_TRUE(capturing);
  ASSERT_TRUE(b->is_capturing(reinterpret_cast<void*>(0x5678), &capturing).ok());
  EXPECT_FALSE(capturing);  // another stream is not
  // The legacy stream is blocked by the capture (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT).
  capturing = false;
  ASSERT_TRUE(b->is_capturing(nullptr, &capturing).ok());
  EXPECT_TRUE(capturing);
  fake().set_capture_status(stream, 2);  // invalidated: still inside a capture
  ASSERT_TRUE(b->is_capturing(stream, &capturing).ok());
  EXPECT_TRUE(capturing);
  fake().set_capture_status(stream, 0);
  ASSERT_TRUE(b->is_capturing(nullptr, &capturing).ok());
  EXPECT_FALSE(capturing);
}

// Page-locking host memory for faster copies (optional entry points, cuMemHostRegister_v2 /
// muMemHostRegister_v2); unpinning what is not pinned is a Status naming the call.
TEST_P(FakeDriverBackend, PinAndUnpinHostMemory) {
  auto b = open();
  ASSERT_NE(b, nullptr);
  std::vector<unsigned char> host(4096);
  ASSERT_TRUE(b->pin_host(host.data(), host.size()).ok());
  Status again = b->pin_host(host.data(), host.size());
  EXPECT_EQ(again.code, 712);
  EXPECT_EQ(std::string(again.what), std::string(call_prefix()) + "MemHostRegister_v2");
  EXPECT_TRUE(b->unpin_host(host.data()).ok());
  Status twice = b->unpin_host(host.data());
  EXPECT_EQ(twice.code, 713);
  EXPECT_EQ(std::string(twice.what), std::string(call_prefix()) + "MemHostUnregister");
}

// A copy within the device (optional cuMemcpyDtoD_v2, then a wait on the stream) leaves the
// bytes in place on return; a range that is not mapped is a Status naming the call.
TEST_P(FakeDriverBackend, CopyWithinTheDevice) {
  std::size_t g = 0;
  std::uintptr_t base = 0;
  auto b = open_mapped(&g, &base);
  ASSERT_NE(b, nullptr);
  const char text[] = "copied within the device";
  ASSERT_TRUE(b->write(base, text, sizeof text).ok());
  ASSERT_TRUE(b->copy_within(base + 1000, base, sizeof text).ok());
  char back[sizeof text] = {};
  ASSERT_TRUE(b->read(back, base + 1000, sizeof back).ok());
  EXPECT_STREQ(back, text);
  Status outside = b->copy_within(base + g, base, 16);  // the second granule is not mapped
  EXPECT_EQ(outside.code, 1);
  EXPECT_EQ(std::string(outside.what), std::string(call_prefix()) + "MemcpyDtoD_v2");
  ASSERT_TRUE(b->unmap(base, g).ok());
  ASSERT_TRUE(b->release(base, 2 * g).ok());
}

TEST_P(FakeDriverBackend, DeviceFaultComesBackFromSynchronize) {
  auto b = open();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->synchronize().ok());
  fake().set_sticky_error(700);
  const Status s = b->synchronize();
  EXPECT_EQ(s.code, 700);
  EXPECT_EQ(std::string(s.what), std::string(call_prefix()) + "CtxSynchronize");
  EXPECT_THAT(mate::device::describe(*b, s),
              HasSubstr(std::string(error_prefix()) +
                        "ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered"));
  EXPECT_EQ(b->synchronize().code, 700);  // sticky
  fake().set_sticky_error(0);
}

TEST_P(FakeDriverBackend, CallersContextIsRestoredOnEveryThread) {
  auto b = open();
  ASSERT_NE(b, nullptr);
  auto check_on_this_thread = [&] {
    std::uintptr_t base = 0;
    ASSERT_TRUE(b->reserve(b->granularity(), &base).ok());
    ASSERT_TRUE(b->map(base, b->granularity()).ok());
    ASSERT_TRUE(b->fill(base, 1, 1).ok());  // needs a current context in the fake
    ASSERT_TRUE(b->synchronize().ok());
    void* current = reinterpret_cast<void*>(1);
    ASSERT_EQ(fake().cu_ctx_get_current(&current), 0);
    EXPECT_EQ(current, nullptr);  // what it was before the calls
    ASSERT_TRUE(b->unmap(base, b->granularity()).ok());
    ASSERT_TRUE(b->release(base, b->granularity()).ok());
  };
  check_on_this_thread();
  std::thread other(check_on_this_thread);
  other.join();
}

INSTANTIATE_TEST_SUITE_P(Prefixes, FakeDriverBackend, ::testing::Values(Kind::Cuda, Kind::Musa),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return std::string(info.param == Kind::Musa ? "mu" : "cu");
                         });

// ---- choosing and finding a driver ----

class DriverSelection : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(fake().set_granularity(kDefaultGranularity), 0);
    ASSERT_EQ(fake().set_devices(1, "9.0"), 0);
  }
  ScopedOverride fake_path_{Var::MATE_FAKE_DRIVER_PATH, MATE_FAKE_DRIVER_LIBRARY};
};

// Under auto the process-wide backend is CUDA's, yet MUSA memory (a MUSA dump replayed where both
// drivers are installed) gets a MUSA backend. In a child: the process-wide backend is made once.
int backends_for_both_kinds_under_auto() {
  mate::device::DriverBackend* cuda = mate::device::driver_backend_for(Kind::Cuda);
  mate::device::DriverBackend* musa = mate::device::driver_backend_for(Kind::Musa);
  if (cuda == nullptr || cuda != mate::device::driver_backend() || cuda->kind() != Kind::Cuda) return 3;
  if (musa == nullptr || musa->kind() != Kind::Musa) return 4;
  if (mate::device::driver_backend_for(Kind::Musa) != musa) return 5;  // opened once
  return 0;
}

TEST_F(DriverSelection, AutoGivesEachKindOfMemoryItsOwnDriver) {
  EXPECT_EXIT(std::_Exit(backends_for_both_kinds_under_auto()), ::testing::ExitedWithCode(0), "");
}

TEST_F(DriverSelection, ForcedByMateDeviceDriver) {
  std::string reason;
  {
    ScopedOverride choice(Var::MATE_DEVICE_DRIVER, "musa");
    auto b = mate::device::open_selected_driver_backend(&reason);
    ASSERT_NE(b, nullptr) << reason;
    EXPECT_EQ(b->kind(), Kind::Musa);
  }
  {
    ScopedOverride choice(Var::MATE_DEVICE_DRIVER, "cuda");
    auto b = mate::device::open_selected_driver_backend(&reason);
    ASSERT_NE(b, nullptr) << reason;
    EXPECT_EQ(b->kind(), Kind::Cuda);
  }
  {
    ScopedOverride choice(Var::MATE_DEVICE_DRIVER, std::nullopt);  // auto: CUDA first
    auto b = mate::device::open_selected_driver_backend(&reason);
    ASSERT_NE(b, nullptr) << reason;
    EXPECT_EQ(b->kind(), Kind::Cuda);
  }
  {
    ScopedOverride choice(Var::MATE_DEVICE_DRIVER, "rocm");
    EXPECT_EQ(mate::device::open_selected_driver_backend(&reason), nullptr);
    EXPECT_THAT(reason, HasSubstr("MATE_DEVICE_DRIVER"));
    EXPECT_THAT(reason, HasSubstr("rocm"));
    EXPECT_THAT(mate::device::device_backends_summary(), HasSubstr("not probed"));
  }
}

TEST_F(DriverSelection, MissingDriverLibraryIsAReason) {
  ScopedOverride path(Var::MATE_FAKE_DRIVER_PATH, "/nonexistent/libno-driver.so");
  const auto probe = mate::device::probe_driver(Kind::Cuda);
  EXPECT_FALSE(probe.opened);
  EXPECT_FALSE(probe.loaded);
  EXPECT_THAT(probe.reason, HasSubstr("/nonexistent/libno-driver.so"));
  EXPECT_THAT(probe.reason, HasSubstr("No such file"));
  std::string reason;
  EXPECT_EQ(mate::device::open_selected_driver_backend(&reason), nullptr);
  EXPECT_THAT(reason, HasSubstr("cuda driver: /nonexistent/libno-driver.so"));
  EXPECT_THAT(reason, HasSubstr("musa driver: /nonexistent/libno-driver.so"));
  EXPECT_THAT(mate::device::device_backends_summary(),
              HasSubstr("host (mmap); cuda driver: not found (/nonexistent/libno-driver.so"));
}

TEST_F(DriverSelection, LibraryWithoutTheDriverApiIsAReason) {
  ScopedOverride path(Var::MATE_FAKE_DRIVER_PATH, "libm.so.6");
  std::string reason;
  EXPECT_EQ(mate::device::open_driver_backend(Kind::Musa, 0, &reason), nullptr);
  EXPECT_THAT(reason, HasSubstr("libm.so.6: missing entry point muGetErrorName"));
  EXPECT_THAT(mate::device::device_backends_summary(),
              HasSubstr("cuda driver: unusable (libm.so.6: missing entry point cuGetErrorName"));
}

TEST_F(DriverSelection, ProcessWideBackendIsChosenOnce) {
  std::string reason;
  DriverBackend* first = mate::device::driver_backend(&reason);
  ASSERT_NE(first, nullptr) << reason;
  EXPECT_EQ(first->kind(), Kind::Cuda);
  EXPECT_EQ(mate::device::driver_backend(), first);
}

TEST_F(DriverSelection, MateVersionSaysWhatWasFound) {
  mate::testing::RunOptions options;
  options.env = {{"MATE_FAKE_DRIVER_PATH", MATE_FAKE_DRIVER_LIBRARY},
                 {"FAKE_DRIVER_DEVICE_COUNT", "2"},
                 {"FAKE_DRIVER_COMPUTE_CAPABILITY", "9.0,8.0"}};
  auto r = mate::testing::run({MATE_BINARY, "version"}, options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string lib = MATE_FAKE_DRIVER_LIBRARY;
  EXPECT_THAT(r.out, HasSubstr("device backends: host (mmap); cuda driver: " + lib +
                               " 13.0, 2 devices (9.0, 8.0); musa driver: " + lib +
                               " 13.0, 2 devices (9.0, 8.0)\n"));

  options.env["MATE_DEVICE_DRIVER"] = "musa";
  r = mate::testing::run({MATE_BINARY, "version"}, options);
  EXPECT_THAT(r.out, HasSubstr("cuda driver: not used (MATE_DEVICE_DRIVER=musa); musa driver: " +
                               lib + " 13.0, 2 devices"));

  options.env = {{"MATE_FAKE_DRIVER_PATH", "/nonexistent/libcuda.so.1"}};
  r = mate::testing::run({MATE_BINARY, "version"}, options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("cuda driver: not found (/nonexistent/libcuda.so.1: cannot open "
                               "shared object file"));
}

// ---- the real driver, when this machine has one (tests/gpu/run_gpu_tests.sh) ----

TEST(RealDriver, MapWriteReadUnmapRelease) {
  std::string reason;
  auto b = mate::device::open_selected_driver_backend(&reason);
  if (!b) GTEST_SKIP() << "no GPU driver with a device: " << reason;
  const std::size_t g = b->granularity();
  EXPECT_GE(g, 4096u);
  EXPECT_EQ(g & (g - 1), 0u);
  std::uintptr_t base = 0;
  ASSERT_TRUE(b->reserve(2 * g, &base).ok());
  Status s = b->map(base, g);
  ASSERT_TRUE(s.ok()) << mate::device::describe(*b, s);
  const char msg[] = "on the device";
  ASSERT_TRUE(b->write(base + g - sizeof msg, msg, sizeof msg).ok());
  ASSERT_TRUE(b->fill(base, 0x5A, 64).ok());
  char back[sizeof msg] = {};
  ASSERT_TRUE(b->read(back, base + g - sizeof msg, sizeof msg).ok());
  EXPECT_STREQ(back, msg);
  unsigned char first = 0;
  ASSERT_TRUE(b->read(&first, base, 1).ok());
  EXPECT_EQ(first, 0x5A);
  ASSERT_TRUE(b->synchronize().ok());
  bool capturing = true;
  ASSERT_TRUE(b->is_capturing(nullptr, &capturing).ok());
  EXPECT_FALSE(capturing);
  ASSERT_TRUE(b->unmap(base, g).ok());
  ASSERT_TRUE(b->release(base, 2 * g).ok());
  const auto archs = mate::device::visible_device_archs(b->kind());
  ASSERT_FALSE(archs.empty());
  EXPECT_EQ(archs[0], b->arch());
}

}  // namespace
