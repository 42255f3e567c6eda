// A kernel library that links MATE statically (here the sample library `mate replay --lib`
// loads) in a process that has libmate.so: the library's copy of the dump writer must bind to the
// process's one, so that a call logged at level 10 is dumped once, not once per copy of MATE
// (docs/dumps-and-replay.md). The writer installs its hook from a static initializer that calls
// a function of its own file; built with -fno-semantic-interposition, that call would stay in
// the library's copy and install a second writer. A plain program, not a gtest one: the test main
// links MATE's components statically, and the only MATE here must be libmate.so's and the
// library's.
//
//   one_dump_writer <kernel library linking MATE statically>
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <string>

#include "mate/dump/call_record.hpp"
#include "mate/log/api.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: one_dump_writer <library>\n");
    return 2;
  }
  char pattern[] = "/tmp/mate_one_dump_writer_XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  const std::filesystem::path root(pattern);
  const std::string dumps = (root / "dumps").string();
  ::setenv("MATE_LOGLEVEL", "10", 1);  // read at the first logged call, below
  ::setenv("MATE_DUMP_DIR", dumps.c_str(), 1);
  ::setenv("MATE_LOGDEST", (root / "log.txt").c_str(), 1);
  if (::dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", ::dlerror());
    return 2;
  }
  float data[4] = {1, 2, 3, 4};
  std::int64_t shape[1] = {4};
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  const float sum = MATE_API("test.one_dump_writer", &t).run([&] { return data[0] + data[1] + data[2] + data[3]; });
  const auto calls = mate::dump::find_call_dirs(dumps);
  std::filesystem::remove_all(root);
  if (sum != 10 || calls.size() != 1) {
    std::printf("one logged call at level 10 made %zu call directories (expected 1)\n", calls.size());
    return 1;
  }
  std::printf("one call, one dump, with a second copy of MATE loaded\n");
  return 0;
}
