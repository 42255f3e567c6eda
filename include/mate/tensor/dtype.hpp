// mate/tensor/dtype.hpp — element types and devices of DLPack tensors, as MATE names them.
//
// Debian's libdlpack-dev is DLPack 0.6: it has kDLBfloat but no bool, no fp8 and no MUSA device.
// MATE follows DLPack 1.1's numbering for the type codes 0.6 lacks, so tensors exported by a
// DLPack 1.x producer (PyTorch, JAX, CuPy) are understood as they are:
//   kDLBool = 6, kDLFloat8_e4m3fn = 10, kDLFloat8_e5m2 = 12 (DLPack 1.1 dlpack.h).
// Upstream DLPack has no MUSA device type. MATE reads kDLExtDev (12, "reserved extension
// device") as MUSA and names it mate::tensor::kDLMUSA; a MUSA producer must export with it.
// Which DLPack device codes belong to which vendor is the vendor table's (mate/device/vendors.hpp).
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "mate/device/backend.hpp"
#include "mate/device/vendors.hpp"

namespace mate::tensor {

// DLPack 1.1 type codes missing from DLPack 0.6 (see above).
inline constexpr std::uint8_t kDLBool = 6;
inline constexpr std::uint8_t kDLFloat8_e4m3fn = 10;
inline constexpr std::uint8_t kDLFloat8_e5m2 = 12;
// MATE's device code for MUSA memory (DLPack's extension device; the vendor table's).
inline constexpr DLDeviceType kDLMUSA = device::kDLMUSA;

// The element types MATE understands (lanes == 1). Everything else is Unsupported: its metadata
// is still logged, with DLPack's code/bits/lanes, but it has no statistics.
enum class ScalarType : std::uint8_t {
  F64, F32, F16, BF16, F8E4M3, F8E5M2,
  I8, I16, I32, I64, U8, U16, U32, U64, Bool,
  Unsupported,
};

ScalarType scalar_type(DLDataType t) noexcept;
// "f32", "bf16", "f8e4m3", "i64", "u8", "bool", ...; Unsupported types are spelled from their
// DLPack fields, e.g. "dlpack(code=5,bits=64,lanes=1)".
std::string dtype_name(DLDataType t);
// The name of a supported scalar type, as dtype_name spells it ("f32", ...); "" for Unsupported.
// No string is built (the text log writes one per tensor argument).
std::string_view scalar_type_name(ScalarType s) noexcept;
// Bytes per element (bits * lanes / 8, rounded up). For a packed type (below) this overstates
// what its elements occupy: their bytes are TensorView::layout()'s.
std::size_t element_size(DLDataType t) noexcept;
// Bits per element: bits * lanes.
inline std::uint32_t element_bits(DLDataType t) noexcept { return std::uint32_t{t.bits} * t.lanes; }
// Whether elements are packed below whole bytes (DLPack 1.1: a sub-byte type such as
// float4_e2m1fn, bits 4, lanes 1, is packed little bit-endian: element i is bits [i*w, (i+1)*w)).
inline bool is_packed(DLDataType t) noexcept { return element_bits(t) % 8 != 0; }
bool is_floating(ScalarType s) noexcept;

// DLDataType values for each ScalarType (for building tensors in code and tests).
DLDataType dl_dtype(ScalarType s) noexcept;

// Where the data lives, as far as reading it goes: the host, one enumerator per device::Kind of
// a vendor (same order and values as device::Kind), or somewhere MATE cannot read.
enum class Memory { Host, Cuda, Musa, Other };
Memory memory_of(DLDevice d) noexcept;
// "cpu", "cuda:0", "cuda_host", "cuda_managed:1", "musa:0", "dlpack_device(4):0".
std::string device_name(DLDevice d);
// device_name of a kDLCPU device (for writers that skip building the string in the common case).
inline constexpr std::string_view kCpuDeviceName = "cpu";
// The device layer's kind for device memory (Cuda or Musa); Host otherwise.
device::Kind device_kind(Memory m) noexcept;

}  // namespace mate::tensor

// The inverses of dtype_name and device_name (what records and dumps read back); nullopt for a
// name they never write. A device's id is 0 where its name carries none ("cpu", "cuda_host").
// (src/tensor/names.cpp)
namespace mate::tensor {
std::optional<DLDataType> dtype_named(std::string_view name);
std::optional<DLDevice> device_named(std::string_view name);
}  // namespace mate::tensor
