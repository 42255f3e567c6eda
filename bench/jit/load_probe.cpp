// The process the warm-hit benchmark starts: `load` runs load_module() on the sample module
// (already built), `dlopen PATH` only dlopens the library and looks the symbol up. Same binary
// in both modes, so process start-up costs cancel out in the comparison.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "mate/jit/catalog.hpp"
#include "mate/jit/module.hpp"

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "dlopen") == 0) {
    void* h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    return h != nullptr && dlsym(h, "mate_sample_axpy") != nullptr ? 0 : 1;
  }
  if (argc == 2 && (std::strcmp(argv[1], "load") == 0 || std::strcmp(argv[1], "path") == 0)) {
    try {
      auto m = mate::jit::load_module(mate::jit::sample_axpy_spec("float", 64));
      if (m.symbol("mate_sample_axpy") == nullptr) return 1;
      if (argv[1][0] == 'p') std::printf("%s %s\n", std::string(mate::jit::to_string(m.origin())).c_str(), m.path().c_str());
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "load_probe: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "usage: jit_load_probe load | path | dlopen LIBRARY\n");
  return 2;
}
