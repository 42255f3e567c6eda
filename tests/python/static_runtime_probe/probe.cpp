// A shared library linked with -static-libstdc++ (tests/python/CMakeLists.txt), as every shared
// library MATE builds is with a toolchain whose C++ runtime is static (the lent GPU machine's
// image). It uses what makes libstdc++ define process-wide (STB_GNU_UNIQUE) symbols: locale
// facets, streams, exceptions. tests/python/test_static_runtime.py checks that none of the
// runtime's symbols is exported and that `import torch` after loading it works.
#include <locale>
#include <sstream>
#include <stdexcept>
#include <string>

extern "C" int mate_static_runtime_probe(int x) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << x;
  try {
    if (x < 0) throw std::invalid_argument("negative");
  } catch (const std::exception&) {
    return -1;
  }
  return static_cast<int>(std::stoi(out.str()) + 1);
}
