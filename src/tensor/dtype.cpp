// DLPack type and device codes -> MATE's names (see dtype.hpp for the codes 0.6 lacks).
#include "mate/tensor/dtype.hpp"

#include <fmt/format.h>

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

std::string dtype_name(DLDataType t) {
  static constexpr const char* kNames[] = {"f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2",
                                           "i8",  "i16", "i32", "i64",  "u8",     "u16",
                                           "u32", "u64", "bool"};
  ScalarType s = scalar_type(t);
  if (s != ScalarType::Unsupported) return kNames[static_cast<int>(s)];
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

Memory memory_of(DLDevice d) noexcept {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory: host-readable
      return Memory::Host;
    case kDLCUDA:
    case kDLCUDAManaged:
      return Memory::Cuda;
    case kDLMUSA:
      return Memory::Musa;
    default:
      return Memory::Other;
  }
}

std::string device_name(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDA: return fmt::format("cuda:{}", d.device_id);
    case kDLCUDAManaged: return fmt::format("cuda_managed:{}", d.device_id);
    case kDLMUSA: return fmt::format("musa:{}", d.device_id);
    default: return fmt::format("dlpack_device({}):{}", static_cast<int>(d.device_type), d.device_id);
  }
}

device::Kind device_kind(Memory m) noexcept {
  return m == Memory::Cuda ? device::Kind::Cuda : m == Memory::Musa ? device::Kind::Musa
                                                                     : device::Kind::Host;
}

}  // namespace mate::tensor
