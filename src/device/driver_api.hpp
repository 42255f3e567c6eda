// The subset of the CUDA / MUSA driver API the driver backend calls, declared here so that MATE
// builds without vendor headers, and the loader that resolves it from a library by prefix.
//
// The MUSA driver API mirrors the CUDA one name for name (cu… → mu…), with the same result
// codes, enum values and struct layouts, so one set of declarations serves both. The layouts
// below must match the real drivers' ABI exactly: tests/gpu/test_driver_abi.cpp static_asserts
// them against <cuda.h> whenever the CUDA toolkit is installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mate/device/backend.hpp"

namespace mate::device::driver {

using Result = int;  // CUresult / MUresult
using DevicePtr = unsigned long long;  // CUdeviceptr (64-bit)
using Device = int;                    // CUdevice
using Context = void*;                 // CUcontext
using Stream = void*;                  // CUstream
using AllocationHandle = unsigned long long;  // CUmemGenericAllocationHandle

// Result codes used by name (identical for CUDA_ERROR_* and MUSA_ERROR_*).
inline constexpr Result kSuccess = 0;
inline constexpr Result kErrorInvalidValue = 1;
inline constexpr Result kErrorOutOfMemory = 2;
inline constexpr Result kErrorNotInitialized = 3;
inline constexpr Result kErrorNoDevice = 100;
inline constexpr Result kErrorInvalidDevice = 101;
inline constexpr Result kErrorInvalidContext = 201;
inline constexpr Result kErrorIllegalAddress = 700;
inline constexpr Result kErrorNotSupported = 801;
inline constexpr Result kErrorStreamCaptureImplicit = 906;

// CUmemLocation: {CUmemLocationType type; int id;}
struct MemLocation {
  int type;
  int id;
};
inline constexpr int kMemLocationTypeDevice = 1;

// CUmemAllocationProp (v1).
struct MemAllocationProp {
  int type;                   // CUmemAllocationType
  int requestedHandleTypes;   // CUmemAllocationHandleType
  MemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
inline constexpr int kMemAllocationTypePinned = 1;
inline constexpr int kMemHandleTypeNone = 0;

// CUmemAccessDesc: {CUmemLocation location; CUmemAccess_flags flags;}
struct MemAccessDesc {
  MemLocation location;
  int flags;
};
inline constexpr int kMemAccessFlagsProtNone = 0;
inline constexpr int kMemAccessFlagsProtRead = 1;
inline constexpr int kMemAccessFlagsProtReadWrite = 3;

inline constexpr int kMemAllocGranularityMinimum = 0;
inline constexpr int kDeviceAttributeComputeCapabilityMajor = 75;
inline constexpr int kDeviceAttributeComputeCapabilityMinor = 76;
inline constexpr int kStreamCaptureStatusNone = 0;
inline constexpr int kStreamCaptureStatusActive = 1;
inline constexpr int kStreamCaptureStatusInvalidated = 2;

static_assert(sizeof(MemLocation) == 8);
static_assert(sizeof(MemAllocationProp) == 32);
static_assert(sizeof(MemAccessDesc) == 12);

// X(member, name without prefix, versioned suffix, return, parameters)
// The versioned suffix is part of the exported name: cuMemcpyHtoD without _v2 is the legacy
// 32-bit-size entry point, so the loader asks for exactly the name listed here.
#define MATE_DRIVER_ENTRY_POINTS(X)                                                          \
  X(GetErrorName, "GetErrorName", "", Result, (Result, const char**))                        \
  X(GetErrorString, "GetErrorString", "", Result, (Result, const char**))                    \
  X(Init, "Init", "", Result, (unsigned int))                                                \
  X(DriverGetVersion, "DriverGetVersion", "", Result, (int*))                                \
  X(DeviceGetCount, "DeviceGetCount", "", Result, (int*))                                    \
  X(DeviceGet, "DeviceGet", "", Result, (Device*, int))                                      \
  X(DeviceGetAttribute, "DeviceGetAttribute", "", Result, (int*, int, Device))               \
  X(DevicePrimaryCtxRetain, "DevicePrimaryCtxRetain", "", Result, (Context*, Device))        \
  X(DevicePrimaryCtxRelease, "DevicePrimaryCtxRelease", "_v2", Result, (Device))           \
  X(CtxGetCurrent, "CtxGetCurrent", "", Result, (Context*))                                  \
  X(CtxSetCurrent, "CtxSetCurrent", "", Result, (Context))                                   \
  X(CtxGetDevice, "CtxGetDevice", "", Result, (Device*))                                     \
  X(CtxSynchronize, "CtxSynchronize", "", Result, ())                                        \
  X(MemGetAllocationGranularity, "MemGetAllocationGranularity", "", Result,                  \
    (std::size_t*, const MemAllocationProp*, int))                                           \
  X(MemAddressReserve, "MemAddressReserve", "", Result,                                      \
    (DevicePtr*, std::size_t, std::size_t, DevicePtr, unsigned long long))                   \
  X(MemAddressFree, "MemAddressFree", "", Result, (DevicePtr, std::size_t))                  \
  X(MemCreate, "MemCreate", "", Result,                                                      \
    (AllocationHandle*, std::size_t, const MemAllocationProp*, unsigned long long))          \
  X(MemRelease, "MemRelease", "", Result, (AllocationHandle))                                \
  X(MemMap, "MemMap", "", Result,                                                            \
    (DevicePtr, std::size_t, std::size_t, AllocationHandle, unsigned long long))             \
  X(MemUnmap, "MemUnmap", "", Result, (DevicePtr, std::size_t))                              \
  X(MemSetAccess, "MemSetAccess", "", Result,                                                \
    (DevicePtr, std::size_t, const MemAccessDesc*, std::size_t))                             \
  X(MemcpyHtoD, "MemcpyHtoD", "_v2", Result, (DevicePtr, const void*, std::size_t))          \
  X(MemcpyDtoH, "MemcpyDtoH", "_v2", Result, (void*, DevicePtr, std::size_t))                \
  X(MemsetD8, "MemsetD8", "_v2", Result, (DevicePtr, unsigned char, std::size_t))            \
  X(StreamIsCapturing, "StreamIsCapturing", "", Result, (Stream, int*))                     \
  X(MemHostRegister, "MemHostRegister", "_v2", Result, (void*, std::size_t, unsigned int))   \
  X(MemHostUnregister, "MemHostUnregister", "", Result, (void*))                            \
  X(MemcpyDtoD, "MemcpyDtoD", "_v2", Result, (DevicePtr, DevicePtr, std::size_t))            \
  X(StreamSynchronize, "StreamSynchronize", "", Result, (Stream))                            \
  X(StreamGetCtx, "StreamGetCtx", "", Result, (Stream, Context*))

// One enumerator per entry point, in MATE_DRIVER_ENTRY_POINTS order.
enum class Call : int {
#define MATE_DRIVER_ENUM(member, name, suffix, ret, params) member,
  MATE_DRIVER_ENTRY_POINTS(MATE_DRIVER_ENUM)
#undef MATE_DRIVER_ENUM
};
// Entry points MATE works without (left nullptr when the library lacks them): the first four
// only make the guard's canary copies faster (page-locked staging; copies within the device);
// without the last two, which device an allocation under `mate guard-run` is for is not known
// (device 0 is assumed). Resolved by their exact names like the others: an unversioned
// cuMemcpyDtoD is the legacy 32-bit one.
constexpr bool optional_call(Call call) noexcept {
  return call == Call::MemHostRegister || call == Call::MemHostUnregister || call == Call::MemcpyDtoD ||
         call == Call::StreamSynchronize || call == Call::CtxGetDevice || call == Call::StreamGetCtx;
}

#define MATE_DRIVER_COUNT(member, name, suffix, ret, params) +1
inline constexpr int kCallCount = 0 MATE_DRIVER_ENTRY_POINTS(MATE_DRIVER_COUNT);
#undef MATE_DRIVER_COUNT

// The exported names of one vendor's entry points ("cuMemMap", "muMemcpyHtoD_v2"), built from
// its row's symbol prefix once for every vendor and never freed, so that they can serve as
// Status::what, which must outlive any backend.
struct Symbols {
  std::string entry[kCallCount];  // in Call order
  std::string make_context_current;  // "cuCtxGetCurrent/cuCtxSetCurrent (making ... current)"
};
const Symbols& symbols(Kind kind);

// The resolved entry points of one driver library.
struct Api {
  Kind kind = Kind::Cuda;
  const Symbols* symbols = nullptr;  // of `kind`; set by load()
  void* handle = nullptr;  // from dlopen; never closed (the driver lives as long as the process)
  std::string library;
#define MATE_DRIVER_MEMBER(member, name, suffix, ret, params) ret(*member) params = nullptr;
  MATE_DRIVER_ENTRY_POINTS(MATE_DRIVER_MEMBER)
#undef MATE_DRIVER_MEMBER
};

// The full exported name of an entry point of `api`'s driver, e.g. "cuMemMap" / "muMemMap": a
// static string, for Status::what.
const char* call_name(const Api& api, Call call) noexcept;

// Opens the driver library for `kind` (MATE_FAKE_DRIVER_PATH if set, else the vendor row's
// sonames in order) and resolves every entry point. Returns false with *reason naming the library and the
// dlopen/dlsym failure, or an invalid MATE_FAKE_DRIVER_PATH.
bool load(Kind kind, Api* api, std::string* reason);

// "cuMemMap: CUDA_ERROR_INVALID_VALUE (invalid argument)"-style text for a failed call.
std::string describe_result(const Api& api, const char* call, Result result);
const char* error_name(const Api& api, Result result) noexcept;
const char* error_string(const Api& api, Result result) noexcept;

}  // namespace mate::device::driver
