// Out-of-line pieces of argument conversion.
#include "mate/log/arg.hpp"

namespace mate::log::detail {

std::string int_type_name(bool is_signed, std::size_t bytes) {
  return (is_signed ? "i" : "u") + std::to_string(bytes * 8);
}

}  // namespace mate::log::detail
