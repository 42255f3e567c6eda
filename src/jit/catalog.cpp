#include "mate/jit/catalog.hpp"

#include <algorithm>
#include <mutex>

namespace mate::jit {

// Embedded at build time from src/jit/samples/ (cmake/MateEmbedText.cmake).
namespace samples {
extern const char kAxpyTemplate[];
extern const char kScaleCudaTemplate[];
}  // namespace samples

namespace {

std::mutex& mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::pair<std::string, ModuleProvider>>& providers() {
  static std::vector<std::pair<std::string, ModuleProvider>> p;
  return p;
}

}  // namespace

void register_module_provider(const std::string& library, ModuleProvider provider) {
  std::lock_guard<std::mutex> lock(mutex());
  auto& p = providers();
  if (std::find(p.begin(), p.end(), std::make_pair(library, provider)) == p.end()) p.emplace_back(library, provider);
}

std::vector<CatalogEntry> known_modules() {
  std::vector<CatalogEntry> out;
  for (auto& spec : sample_modules()) out.push_back({"mate.samples", std::move(spec)});
  std::vector<std::pair<std::string, ModuleProvider>> copy;
  {
    std::lock_guard<std::mutex> lock(mutex());
    copy = providers();
  }
  for (const auto& [library, provider] : copy)
    for (auto& spec : provider()) out.push_back({library, std::move(spec)});
  return out;
}

ModuleSpec sample_axpy_spec(const std::string& dtype, int tile) {
  std::string short_type = dtype == "float" ? "f32" : dtype == "double" ? "f64" : dtype;
  return ModuleSpec{
      .name = "mate_sample_axpy_" + short_type + "_t" + std::to_string(tile),
      .toolchain = Toolchain::Host,
      .sources = {{"axpy.cpp", samples::kAxpyTemplate}},
      .params = {{"dtype", dtype}, {"tile", std::to_string(tile)}},
  };
}

ModuleSpec sample_cuda_scale_spec() {
  return ModuleSpec{
      .name = "mate_sample_scale_cuda",
      .toolchain = Toolchain::Cuda,
      .sources = {{"scale.cu", samples::kScaleCudaTemplate}},
      .params = {{"block", "256"}},
  };
}

std::vector<ModuleSpec> sample_modules() {
  return {sample_axpy_spec("float", 64), sample_axpy_spec("double", 32), sample_cuda_scale_spec()};
}

}  // namespace mate::jit
