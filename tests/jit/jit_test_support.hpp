// Shared pieces of the JIT tests: no visible devices, and a compiler wrapper that logs every
// call, can slow a build down, and can SIGKILL the process that started the build. (TempDir and
// read_file come from tests/support.)
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "mate/jit/module.hpp"
#include "temp_dir.hpp"

namespace mate::jit::testing {

// While alive, no CUDA or MUSA device is visible to the JIT, whatever the machine has: tests of
// "no arch list" must not depend on whether a GPU is installed.
struct NoVisibleDevices {
  static std::vector<std::string> none() { return {}; }
  NoVisibleDevices() {
    set_device_arch_detector(device::Kind::Cuda, &none);
    set_device_arch_detector(device::Kind::Musa, &none);
  }
  ~NoVisibleDevices() {
    set_device_arch_detector(device::Kind::Cuda, nullptr);
    set_device_arch_detector(device::Kind::Musa, nullptr);
  }
  NoVisibleDevices(const NoVisibleDevices&) = delete;
  NoVisibleDevices& operator=(const NoVisibleDevices&) = delete;
};

using ::mate::testing::read_file;
using ::mate::testing::TempDir;

inline int count_lines_with(const std::string& text, const std::string& needle) {
  int n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.find(needle) != std::string::npos) ++n;
  return n;
}

// Writes <dir>/cxx: appends its arguments to <dir>/cxx.log, sleeps $JIT_TEST_SLEEP seconds
// before compiling, and when <dir>/kill_builder exists removes it and SIGKILLs the process that
// started ninja (the MATE builder), then fails.
// (ninja runs the wrapper through `sh -c`, so the builder is found by walking up to ninja.) Runs /usr/bin/c++ otherwise.
inline std::string write_compiler_wrapper(const std::string& dir) {
  std::string path = dir + "/cxx";
  std::ofstream out(path);
  out << "#!/bin/sh\n"
      << "echo \"$*\" >> " << dir << "/cxx.log\n"
      << "echo \"LD_PRELOAD=${LD_PRELOAD:-} AUTO_INSTALL=${MATE_GUARD_ALLOCATOR_AUTO_INSTALL:-}\" >> " << dir
      << "/cxx.env\n"
      << "case \" $* \" in *' --version '*) exec /usr/bin/c++ \"$@\";; esac\n"
      << "if [ -e " << dir << "/kill_builder ]; then\n"
      << "  rm -f " << dir << "/kill_builder\n"
      << "  p=$PPID\n"
      << "  while [ \"$p\" -gt 1 ]; do\n"
      << "    parent=$(awk '{print $4}' /proc/$p/stat)\n"
      << "    if [ \"$(cat /proc/$p/comm)\" = ninja ]; then kill -9 \"$parent\"; break; fi\n"
      << "    p=$parent\n"
      << "  done\n"
      << "  exit 1\n"
      << "fi\n"
      << "case \" $* \" in *' -c '*) sleep \"${JIT_TEST_SLEEP:-0}\";; esac\n"
      << "exec /usr/bin/c++ \"$@\"\n";
  out.close();
  chmod(path.c_str(), 0755);
  return path;
}

}  // namespace mate::jit::testing
