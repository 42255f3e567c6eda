// MATE declares the few driver types it needs itself (src/device/driver_api.hpp) so that it
// builds without vendor headers; this checks them against the CUDA toolkit's <cuda.h>. The MUSA
// driver mirrors these layouts and values.
#include <cuda.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "device/driver_api.hpp"
#include "mate/config.hpp"
#include "mate/device/driver.hpp"

namespace d = mate::device::driver;

#define SAME_LAYOUT(Ours, Theirs)                         \
  static_assert(sizeof(Ours) == sizeof(Theirs), #Ours);   \
  static_assert(alignof(Ours) == alignof(Theirs), #Ours)
#define SAME_OFFSET(Ours, Theirs, ours_field, their_field)                              \
  static_assert(offsetof(Ours, ours_field) == offsetof(Theirs, their_field), #ours_field); \
  static_assert(sizeof(Ours::ours_field) == sizeof(Theirs::their_field), #ours_field)

SAME_LAYOUT(d::MemLocation, CUmemLocation);
SAME_OFFSET(d::MemLocation, CUmemLocation, type, type);
SAME_OFFSET(d::MemLocation, CUmemLocation, id, id);
SAME_LAYOUT(d::MemAllocationProp, CUmemAllocationProp);
SAME_OFFSET(d::MemAllocationProp, CUmemAllocationProp, type, type);
SAME_OFFSET(d::MemAllocationProp, CUmemAllocationProp, requestedHandleTypes, requestedHandleTypes);
SAME_OFFSET(d::MemAllocationProp, CUmemAllocationProp, location, location);
SAME_OFFSET(d::MemAllocationProp, CUmemAllocationProp, win32HandleMetaData, win32HandleMetaData);
SAME_OFFSET(d::MemAllocationProp, CUmemAllocationProp, allocFlags, allocFlags);
SAME_LAYOUT(d::MemAccessDesc, CUmemAccessDesc);
SAME_OFFSET(d::MemAccessDesc, CUmemAccessDesc, location, location);
SAME_OFFSET(d::MemAccessDesc, CUmemAccessDesc, flags, flags);
SAME_LAYOUT(d::DevicePtr, CUdeviceptr);
SAME_LAYOUT(d::Device, CUdevice);
SAME_LAYOUT(d::Context, CUcontext);
SAME_LAYOUT(d::Stream, CUstream);
SAME_LAYOUT(d::AllocationHandle, CUmemGenericAllocationHandle);
SAME_LAYOUT(d::Result, CUresult);

static_assert(d::kSuccess == CUDA_SUCCESS);
static_assert(d::kErrorInvalidValue == CUDA_ERROR_INVALID_VALUE);
static_assert(d::kErrorOutOfMemory == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(d::kErrorNotInitialized == CUDA_ERROR_NOT_INITIALIZED);
static_assert(d::kErrorNoDevice == CUDA_ERROR_NO_DEVICE);
static_assert(d::kErrorInvalidDevice == CUDA_ERROR_INVALID_DEVICE);
static_assert(d::kErrorInvalidContext == CUDA_ERROR_INVALID_CONTEXT);
static_assert(d::kErrorIllegalAddress == CUDA_ERROR_ILLEGAL_ADDRESS);
static_assert(d::kErrorStreamCaptureImplicit == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
static_assert(d::kMemLocationTypeDevice == CU_MEM_LOCATION_TYPE_DEVICE);
static_assert(d::kMemAllocationTypePinned == CU_MEM_ALLOCATION_TYPE_PINNED);
static_assert(d::kMemHandleTypeNone == CU_MEM_HANDLE_TYPE_NONE);
static_assert(d::kMemAccessFlagsProtNone == CU_MEM_ACCESS_FLAGS_PROT_NONE);
static_assert(d::kMemAccessFlagsProtRead == CU_MEM_ACCESS_FLAGS_PROT_READ);
static_assert(d::kMemAccessFlagsProtReadWrite == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
static_assert(d::kMemAllocGranularityMinimum == CU_MEM_ALLOC_GRANULARITY_MINIMUM);
static_assert(d::kDeviceAttributeComputeCapabilityMajor ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(d::kDeviceAttributeComputeCapabilityMinor ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(d::kStreamCaptureStatusNone == CU_STREAM_CAPTURE_STATUS_NONE);
static_assert(d::kStreamCaptureStatusActive == CU_STREAM_CAPTURE_STATUS_ACTIVE);
static_assert(d::kStreamCaptureStatusInvalidated == CU_STREAM_CAPTURE_STATUS_INVALIDATED);

// The entry points: the header maps each public name to the exported symbol the loader must
// resolve (cuMemcpyHtoD → cuMemcpyHtoD_v2), and the function's parameters must have the sizes
// MATE passes (enums are ints).
template <class F>
struct Signature;
template <class R, class... A>
struct Signature<R (*)(A...)> {
  static constexpr std::size_t arity = sizeof...(A);
  static constexpr std::size_t result_size = sizeof(R);
  template <std::size_t I>
  using arg = std::tuple_element_t<I, std::tuple<A...>>;
};
template <class Ours, class Theirs, std::size_t... I>
constexpr bool same_argument_sizes(std::index_sequence<I...>) {
  return ((sizeof(typename Signature<Ours>::template arg<I>) ==
           sizeof(typename Signature<Theirs>::template arg<I>)) &&
          ...);
}
template <class Ours, class Theirs>
constexpr bool same_abi() {
  if constexpr (Signature<Ours>::arity != Signature<Theirs>::arity) {
    return false;
  } else {
    return Signature<Ours>::result_size == Signature<Theirs>::result_size &&
           same_argument_sizes<Ours, Theirs>(std::make_index_sequence<Signature<Ours>::arity>{});
  }
}
constexpr bool same_text(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}
#define ABI_STRING2(x) #x
#define ABI_STRING(x) ABI_STRING2(x)
#define ABI_HEADER_SYMBOL(member) ABI_STRING(cu##member)
#define CHECK_ENTRY_POINT(member, name, suffix, ret, params)                                \
  static_assert(same_text(ABI_HEADER_SYMBOL(member), "cu" name suffix),                      \
                "cu" name suffix " is not the symbol <cuda.h> calls");                        \
  static_assert(same_abi<decltype(d::Api::member), decltype(&::cu##member)>(),               \
                "cu" name suffix ": parameters differ from <cuda.h>");
MATE_DRIVER_ENTRY_POINTS(CHECK_ENTRY_POINT)

TEST(DriverAbi, DeclarationsMatchTheToolkitHeader) {
  // Everything above is checked at compile time; this records that the check was built.
  SUCCEED() << "built against CUDA " << CUDA_VERSION;
}

#ifdef MATE_CUDA_STUB_DRIVER
// The toolkit's link stub exports every entry point of the real driver (and fails cuInit), so
// loading it checks each name MATE resolves against the driver's export table.
TEST(DriverAbi, EveryEntryPointIsExportedByTheDriver) {
  mate::config::ScopedOverride path(mate::config::Var::MATE_FAKE_DRIVER_PATH,
                                    MATE_CUDA_STUB_DRIVER);
  const auto probe = mate::device::probe_driver(mate::device::Kind::Cuda);
  EXPECT_TRUE(probe.opened) << probe.reason;
  EXPECT_FALSE(probe.loaded);
  EXPECT_THAT(probe.reason, ::testing::Not(::testing::HasSubstr("missing entry point")));
  EXPECT_THAT(probe.reason, ::testing::HasSubstr("cuInit: "));
}
#endif
