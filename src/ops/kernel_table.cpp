#include "ops/kernel_table.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <string_view>
#include <tuple>

#include "mate/config.hpp"
#include "mate/device/vendors.hpp"
#include "mate/ops/ops.hpp"

namespace mate::ops::detail {

namespace {

// Symbols are string literals of this library: a view keeps the lookup free of allocations.
using Key = std::tuple<Kernel, InputType, jit::Toolchain, std::string_view>;

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}
std::map<Key, void*>& table() {
  static std::map<Key, void*> t;
  return t;
}

}  // namespace

// The toolchain of the memory's kind (jit::Toolchain mirrors device::Kind); which of them have
// kernels is the checker's and module_spec's business (host and CUDA).
jit::Toolchain toolchain_for(const Placement& placement) {
  return static_cast<jit::Toolchain>(device::kind_index(tensor::device_kind(placement.memory)));
}

void* kernel_symbol(const char* function, Kernel kernel, InputType type, jit::Toolchain toolchain,
                    const char* symbol) {
  Key key{kernel, type, toolchain, symbol};
  {
    std::lock_guard<std::mutex> lock(table_mutex());
    auto it = table().find(key);
    if (it != table().end()) return it->second;
  }
  register_modules();  // so that module listings of this program show the library
  // Loaded outside the lock: a build may take seconds, and load_module is thread-safe.
  void* address = nullptr;
  try {
    address = jit::load_module(module_spec(kernel, type, toolchain)).symbol(symbol);
  } catch (const jit::ModuleError& e) {
    const char* title = device::kind_title(jit::device_kind(toolchain));
    std::string context = toolchain == jit::Toolchain::Host
                              ? ""
                              : fmt::format("the tensors are on a {0} device, which needs the {0} kernel module: ", title);
    throw jit::ModuleError(e.kind(), fmt::format("mate::ops::{}: {}{}", function, context, e.what()));
  }
  std::lock_guard<std::mutex> lock(table_mutex());
  table().emplace(key, address);
  return address;
}

void forget_kernel_symbols() {
  std::lock_guard<std::mutex> lock(table_mutex());
  table().clear();
}

void check_cuda(const char* function, Kernel kernel, InputType type, const Placement& placement, int error) {
  if (error == 0) return;
  using ErrorString = const char*(int);
  auto* text = reinterpret_cast<ErrorString*>(
      kernel_symbol(function, kernel, type, jit::Toolchain::Cuda, "mate_ops_cuda_error_string"));
  throw KernelError(fmt::format("mate::ops::{}: the CUDA kernel failed on {}: {} (cudaError_t {})", function,
                                tensor::device_name(placement.device), text(error), error));
}

bool dry_run() { return config::dry_run(); }

}  // namespace mate::ops::detail
