// Out-of-line pieces of argument conversion.
#include "mate/log/arg.hpp"

namespace mate::log::detail {

const char* int_type_name(bool is_signed, std::size_t bytes) noexcept {
  switch (bytes) {
    case 1: return is_signed ? "i8" : "u8";
    case 2: return is_signed ? "i16" : "u16";
    case 4: return is_signed ? "i32" : "u32";
    case 8: return is_signed ? "i64" : "u64";
    default: return is_signed ? "i128" : "u128";  // __int128, the only wider integer type
  }
}

}  // namespace mate::log::detail
