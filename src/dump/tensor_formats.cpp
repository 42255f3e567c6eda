// The list of dump tensor formats: a new format adds its line here (see tensor_format.hpp).
#include "tensor_format.hpp"

namespace mate::dump::detail {

namespace {
const TensorFormat* const kFormats[] = {&torch_save_format(), &mtensor_format(), &safetensors_format()};
}

const TensorFormat* tensor_format_named(std::string_view name) noexcept {
  for (const TensorFormat* f : kFormats)
    if (f->name() == name) return f;
  return nullptr;
}

std::string tensor_format_names() {
  std::string out;
  for (const TensorFormat* f : kFormats) out += (out.empty() ? "" : ", ") + std::string(f->name());
  return out;
}

}  // namespace mate::dump::detail
