// Shared pieces of the JIT tests: no visible devices, and a compiler wrapper that logs every
// call, can slow a build down, and can SIGKILL the process that started the build. (TempDir and
// read_file come from tests/support.)
#pragma once

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <cstring>
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

// Damage that keeps a library's size and its ELF header: every byte after the first 64 (the
// ELF header) replaced by garbage. Returns false when the file cannot be rewritten.
inline bool garble_after_elf_header(const std::string& path) {
  std::string bytes = read_file(path);
  if (bytes.size() <= sizeof(Elf64_Ehdr)) return false;
  for (std::size_t i = sizeof(Elf64_Ehdr); i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + 7);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out);
}

// A same-size corruption of a library's code: its .text section filled with ud2 (0f 0b), so
// the library still loads and calling any function traps. Returns false when there is no .text.
inline bool corrupt_code(const std::string& path) {
  std::string bytes = read_file(path);
  if (bytes.size() < sizeof(Elf64_Ehdr)) return false;
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (eh.e_shoff == 0 || eh.e_shstrndx >= eh.e_shnum ||
      eh.e_shoff + std::uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > bytes.size())
    return false;
  auto section = [&](unsigned i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
    return sh;
  };
  const Elf64_Shdr names = section(eh.e_shstrndx);
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = section(i);
    if (names.sh_offset + sh.sh_name >= bytes.size()) continue;
    if (std::strcmp(bytes.c_str() + names.sh_offset + sh.sh_name, ".text") != 0) continue;
    if (sh.sh_offset + sh.sh_size > bytes.size() || sh.sh_size < 2) return false;
    for (std::uint64_t k = 0; k + 1 < sh.sh_size; k += 2) {
      bytes[sh.sh_offset + k] = '\x0f';
      bytes[sh.sh_offset + k + 1] = '\x0b';
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
    return static_cast<bool>(out);
  }
  return false;
}

// A same-size change that leaves the library loadable (its last byte, in the section headers,
// inverted), with its access and modification times put back as they were: only ctime, which
// user space cannot set, still tells that it changed. Returns false when that did not work.
inline bool change_last_byte_keeping_mtime(const std::string& path) {
  struct stat before {}, after {};
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 || ::fstat(fd, &before) != 0 || before.st_size == 0) return false;
  unsigned char byte = 0;
  bool ok = ::pread(fd, &byte, 1, before.st_size - 1) == 1;
  byte = static_cast<unsigned char>(~byte);
  ok = ok && ::pwrite(fd, &byte, 1, before.st_size - 1) == 1;
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ok = ok && ::futimens(fd, times) == 0 && ::fstat(fd, &after) == 0;
  ::close(fd);
  return ok && after.st_size == before.st_size && after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
         after.st_mtim.tv_nsec == before.st_mtim.tv_nsec;
}

// Puts back a file's access and modification times (after a change made another way).
inline bool restore_times(const std::string& path, const struct stat& before) {
  const timespec times[2] = {before.st_atim, before.st_mtim};
  return ::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0;
}

// A verified stamp is written only once the tick of the kernel's file clock in which the
// library last changed is past (src/jit/verify.hpp): tests that expect one wait that long.
inline void wait_past_file_clock_tick() { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }

}  // namespace mate::jit::testing
