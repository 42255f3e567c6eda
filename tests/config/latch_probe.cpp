// Child program for the latching test: reads a latched and a live variable, changes the
// environment behind the registry's back, and reads them again. Latched values must not move.
#include <cstdio>
#include <cstdlib>

#include "mate/config.hpp"

int main() {
  namespace c = mate::config;
  long long level_before = c::loglevel();
  bool verbose_before = c::jit_verbose();
  setenv("MATE_LOGLEVEL", "5", 1);
  setenv("MATE_JIT_VERBOSE", "1", 1);
  std::printf("loglevel %lld -> %lld\n", level_before, static_cast<long long>(c::loglevel()));
  std::printf("jit_verbose %d -> %d\n", verbose_before, c::jit_verbose());
  return 0;
}
