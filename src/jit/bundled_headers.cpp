// The headers every module build gets under include/ (their text is part of every key).
#include "jit/plan.hpp"

namespace mate::jit::detail {

extern const char kModuleAbiHeader[];  // include/mate/jit/module_abi.h, embedded by CMake

const std::vector<RenderedFile>& bundled_headers() {
  static const std::vector<RenderedFile> headers{{"include/mate/jit/module_abi.h", kModuleAbiHeader}};
  return headers;
}

}  // namespace mate::jit::detail
