// A separate process that loads the sample AXPY module, calls it, and says where it came from.
// The JIT process tests start several of these at once, kill them midway, corrupt their cache.
//
// usage: jit_probe [--notice-ms N] [--dlopen-only PATH]
// prints: origin=<aot|jit-cache|jit-built> key=<key> path=<library> result=ok hashed=<n>
// (hashed: how many libraries the load hashed; 0 when a verified stamp vouched for the library)
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "jit/verify.hpp"
#include "mate/jit/catalog.hpp"
#include "mate/jit/module.hpp"

int main(int argc, char** argv) {
  mate::jit::LoadOptions options;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--notice-ms") == 0 && i + 1 < argc) {
      options.lock_notice_after = std::chrono::milliseconds(std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--dlopen-only") == 0 && i + 1 < argc) {
      // The benchmark's baseline: nothing but the dlopen and the symbol lookup.
      void* h = dlopen(argv[++i], RTLD_NOW | RTLD_LOCAL);
      return h != nullptr && dlsym(h, "mate_sample_axpy") != nullptr ? 0 : 1;
    } else {
      std::fprintf(stderr, "jit_probe: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  try {
    auto module = mate::jit::load_module(mate::jit::sample_axpy_spec("float", 64), options);
    auto* axpy = module.function<void(long, float, const float*, float*)>("mate_sample_axpy");
    float x[100], y[100];
    for (int i = 0; i < 100; ++i) x[i] = static_cast<float>(i), y[i] = 1.0f;
    axpy(100, 2.0f, x, y);
    bool ok = y[99] == 199.0f && y[0] == 1.0f;
    std::printf("origin=%s key=%s path=%s result=%s hashed=%llu\n",
                std::string(mate::jit::to_string(module.origin())).c_str(), module.key().c_str(),
                module.path().c_str(), ok ? "ok" : "WRONG",
                static_cast<unsigned long long>(mate::jit::detail::libraries_hashed()));
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit_probe: %s\n", e.what());
    return 1;
  }
}
