// Reading back the names dtype_name() and device_name() write, by matching what they write (so
// the two never disagree).
#include <charconv>

#include "mate/tensor/dtype.hpp"

namespace mate::tensor {

namespace {

template <class T>
bool parse_whole(std::string_view text, T& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::optional<DLDataType> dtype_named(std::string_view name) {
  for (int i = 0; i < static_cast<int>(ScalarType::Unsupported); ++i) {
    const DLDataType t = dl_dtype(static_cast<ScalarType>(i));
    if (dtype_name(t) == name) return t;
  }
  // "dlpack(code=5,bits=64,lanes=1)": a type MATE has no name for.
  constexpr std::string_view kPrefix = "dlpack(code=";
  if (!name.starts_with(kPrefix) || !name.ends_with(")")) return std::nullopt;
  std::string_view rest = name.substr(kPrefix.size(), name.size() - kPrefix.size() - 1);
  const auto bits_at = rest.find(",bits="), lanes_at = rest.find(",lanes=");
  if (bits_at == std::string_view::npos || lanes_at == std::string_view::npos || lanes_at < bits_at) return std::nullopt;
  unsigned code = 0, bits = 0, lanes = 0;
  if (!parse_whole(rest.substr(0, bits_at), code) || !parse_whole(rest.substr(bits_at + 6, lanes_at - bits_at - 6), bits) ||
      !parse_whole(rest.substr(lanes_at + 7), lanes) || code > 255 || bits > 255 || lanes > 65535)
    return std::nullopt;
  const DLDataType t{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits), static_cast<std::uint16_t>(lanes)};
  return dtype_name(t) == name ? std::optional(t) : std::nullopt;
}

std::optional<DLDevice> device_named(std::string_view name) {
  // "<type>:<id>" or "<type>" (no id): try each DLPack device type. DLDeviceType has no fixed
  // underlying type: only the values its enumerators' bit width holds (0..15) may be formed.
  int id = 0;
  if (const auto colon = name.rfind(':'); colon != std::string_view::npos && !parse_whole(name.substr(colon + 1), id))
    return std::nullopt;
  for (int type = 0; type < 16; ++type) {
    for (const int candidate_id : {id, 0}) {
      const DLDevice d{static_cast<DLDeviceType>(type), candidate_id};
      if (device_name(d) == name) return d;
    }
  }
  return std::nullopt;
}

}  // namespace mate::tensor
