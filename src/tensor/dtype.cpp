// DLPack type and device codes -> MATE's names (see dtype.hpp for the codes 0.6 lacks); which
// device code is whose memory comes from the vendor table (mate/device/vendors.hpp).
#include "mate/tensor/dtype.hpp"

#include <fmt/format.h>

#include <iterator>

namespace mate::tensor {

ScalarType scalar_type(DLDataType t) noexcept {
  if (t.lanes != 1) return ScalarType::Unsupported;
  switch (t.code) {
    case kDLFloat:
      return t.bits == 64 ? ScalarType::F64 : t.bits == 32 ? ScalarType::F32
             : t.bits == 16 ? ScalarType::F16 : ScalarType::Unsupported;
    case kDLBfloat:
      return t.bits == 16 ? ScalarType::BF16 : ScalarType::Unsupported;
    case kDLInt:
      return t.bits == 8 ? ScalarType::I8 : t.bits == 16 ? ScalarType::I16
             : t.bits == 32 ? ScalarType::I32 : t.bits == 64 ? ScalarType::I64
             : ScalarType::Unsupported;
    case kDLUInt:
      return t.bits == 8 ? ScalarType::U8 : t.bits == 16 ? ScalarType::U16
             : t.bits == 32 ? ScalarType::U32 : t.bits == 64 ? ScalarType::U64
             : ScalarType::Unsupported;
    case kDLBool:
      return t.bits == 8 ? ScalarType::Bool : ScalarType::Unsupported;
    case kDLFloat8_e4m3fn:
      return t.bits == 8 ? ScalarType::F8E4M3 : ScalarType::Unsupported;
    case kDLFloat8_e5m2:
      return t.bits == 8 ? ScalarType::F8E5M2 : ScalarType::Unsupported;
    default:
      return ScalarType::Unsupported;
  }
}

std::string_view scalar_type_name(ScalarType s) noexcept {
  static constexpr std::string_view kNames[] = {"f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2",
                                                "i8",  "i16", "i32", "i64",  "u8",     "u16",
                                                "u32", "u64", "bool"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(ScalarType::Unsupported));
  return s == ScalarType::Unsupported ? std::string_view() : kNames[static_cast<int>(s)];
}

std::string dtype_name(DLDataType t) {
  const ScalarType s = scalar_type(t);
  if (s != ScalarType::Unsupported) return std::string(scalar_type_name(s));
  return fmt::format("dlpack(code={},bits={},lanes={})", t.code, t.bits, t.lanes);
}

std::size_t element_size(DLDataType t) noexcept {
  return (static_cast<std::size_t>(t.bits) * t.lanes + 7) / 8;
}

bool is_floating(ScalarType s) noexcept {
  return s == ScalarType::F64 || s == ScalarType::F32 || s == ScalarType::F16 ||
         s == ScalarType::BF16 || s == ScalarType::F8E4M3 || s == ScalarType::F8E5M2;
}

DLDataType dl_dtype(ScalarType s) noexcept {
  auto make = [](std::uint8_t code, std::uint8_t bits) { return DLDataType{code, bits, 1}; };
  switch (s) {
    case ScalarType::F64: return make(kDLFloat, 64);
    case ScalarType::F32: return make(kDLFloat, 32);
    case ScalarType::F16: return make(kDLFloat, 16);
    case ScalarType::BF16: return make(kDLBfloat, 16);
    case ScalarType::F8E4M3: return make(kDLFloat8_e4m3fn, 8);
    case ScalarType::F8E5M2: return make(kDLFloat8_e5m2, 8);
    case ScalarType::I8: return make(kDLInt, 8);
    case ScalarType::I16: return make(kDLInt, 16);
    case ScalarType::I32: return make(kDLInt, 32);
    case ScalarType::I64: return make(kDLInt, 64);
    case ScalarType::U8: return make(kDLUInt, 8);
    case ScalarType::U16: return make(kDLUInt, 16);
    case ScalarType::U32: return make(kDLUInt, 32);
    case ScalarType::U64: return make(kDLUInt, 64);
    case ScalarType::Bool: return make(kDLBool, 8);
    case ScalarType::Unsupported: break;
  }
  return make(kDLOpaqueHandle, 0);
}

// Memory's vendor enumerators mirror device::Kind, so the vendor table maps both ways.
static_assert(static_cast<int>(Memory::Host) == static_cast<int>(device::Kind::Host));
static_assert(static_cast<int>(Memory::Cuda) == static_cast<int>(device::Kind::Cuda));
static_assert(static_cast<int>(Memory::Musa) == static_cast<int>(device::Kind::Musa));
static_assert(static_cast<std::size_t>(Memory::Other) == device::kKindCount);

Memory memory_of(DLDevice d) noexcept {
  if (d.device_type == kDLCPU || device::find_vendor_of_pinned_host(d.device_type) != nullptr)
    return Memory::Host;  // pinned host memory is host-readable
  if (const device::Vendor* v = device::find_vendor(d.device_type))
    return static_cast<Memory>(device::kind_index(v->kind));
  return Memory::Other;
}

std::string device_name(DLDevice d) {
  if (d.device_type == kDLCPU) return std::string(kCpuDeviceName);
  if (const device::Vendor* v = device::find_vendor_of_pinned_host(d.device_type))
    return fmt::format("{}_host", v->name);
  if (const device::Vendor* v = device::find_vendor(d.device_type))
    return fmt::format("{}{}:{}", v->name, d.device_type == v->dl_device ? "" : "_managed", d.device_id);
  return fmt::format("dlpack_device({}):{}", static_cast<int>(d.device_type), d.device_id);
}

device::Kind device_kind(Memory m) noexcept {
  return m == Memory::Other ? device::Kind::Host : static_cast<device::Kind>(m);
}

}  // namespace mate::tensor
