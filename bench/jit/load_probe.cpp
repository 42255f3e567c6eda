// The process the warm-hit benchmark starts: `load [MIB]` runs load_module() on a module
// already built (the sample module, or with MIB a padded one of about MIB MiB), `dlopen PATH`
// only dlopens the library and looks the symbol up. Same binary in both modes, so process
// start-up costs cancel out in the comparison. `path [MIB]` loads and prints origin, path and
// how many libraries the load hashed (0 when the library's verified stamp vouched for it).
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "jit/verify.hpp"
#include "mate/jit/catalog.hpp"
#include "mate/jit/module.hpp"

namespace {

// A host module padded with `mib` MiB of read-only data (as a device module carries its
// binaries for several archs): what the load's content-hash check costs per MiB.
mate::jit::ModuleSpec padded_spec(long mib) {
  static const char kSource[] =
      "#include \"mate/jit/module_abi.h\"\n"
      "__asm__(\".section .rodata.mate_bench_pad,\\\"a\\\"\\n.fill {{bytes}}, 1, 0x5a\\n.previous\\n\");\n"
      "MATE_MODULE_EXPORT void mate_sample_axpy(long n, float a, const float* x, float* y) {\n"
      "  for (long i = 0; i < n; ++i) y[i] += a * x[i];\n"
      "}\n";
  return {.name = "mate_bench_padded_" + std::to_string(mib) + "mib",
          .sources = {{"padded.cpp", kSource}},
          .params = {{"bytes", std::to_string(mib << 20)}}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "dlopen") == 0) {
    void* h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    return h != nullptr && dlsym(h, "mate_sample_axpy") != nullptr ? 0 : 1;
  }
  if ((argc == 2 || argc == 3) && (std::strcmp(argv[1], "load") == 0 || std::strcmp(argv[1], "path") == 0)) {
    try {
      long mib = argc == 3 ? std::atol(argv[2]) : 0;
      auto m = mate::jit::load_module(mib > 0 ? padded_spec(mib) : mate::jit::sample_axpy_spec("float", 64));
      if (m.symbol("mate_sample_axpy") == nullptr) return 1;
      if (argv[1][0] == 'p')
        std::printf("%s %s %llu\n", std::string(mate::jit::to_string(m.origin())).c_str(), m.path().c_str(),
                    static_cast<unsigned long long>(mate::jit::detail::libraries_hashed()));
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "load_probe: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "usage: jit_load_probe load [MIB] | path [MIB] | dlopen LIBRARY\n");
  return 2;
}
