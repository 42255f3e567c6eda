// Whether LD_PRELOAD can reach a program's allocator at all: the dynamic loader applies it, so a
// statically linked program (no PT_INTERP) never sees the preload, and the loader ignores
// LD_PRELOAD's path for set-user-ID/set-group-ID programs. Without this check `mate guard-run`
// would run such a program unguarded and report nothing, which reads as "no bug found".
#include "guard/run/preload_blockers.hpp"

#include "mate/config.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

namespace mate::guard {

namespace {

// argv[0] as posix_spawnp finds it: itself when it holds a '/', else the first executable file
// of that name in PATH.
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const std::string path = config::path();
  std::string_view dirs = !path.empty() ? std::string_view(path) : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const std::size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (colon == std::string_view::npos) return "";
    dirs.remove_prefix(colon + 1);
  }
}

// True for a 64-bit ELF executable without a program interpreter (statically linked).
bool static_elf(int fd) {
  Elf64_Ehdr header;
  if (pread(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header)) return false;
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64) return false;
  if (header.e_phentsize != sizeof(Elf64_Phdr)) return false;
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof ph, static_cast<off_t>(header.e_phoff + i * sizeof ph)) != static_cast<ssize_t>(sizeof ph))
      return false;
    if (ph.p_type == PT_INTERP) return false;
  }
  return true;
}

}  // namespace

std::string why_preload_cannot_reach(const std::string& program) {
  const std::string path = find_program(program);
  if (path.empty()) return "";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const bool is_static = regular && static_elf(fd);
  close(fd);
  if (!regular) return "";
  if (is_static)
    return "'" + path + "' is statically linked: LD_PRELOAD cannot reach its allocator, so nothing in it is guarded";
  // Secure execution (the loader then ignores LD_PRELOAD's paths) when running it changes an id.
  if (((st.st_mode & S_ISUID) != 0 && st.st_uid != geteuid()) || ((st.st_mode & S_ISGID) != 0 && st.st_gid != getegid()))
    return "'" + path + "' is set-user-ID or set-group-ID: the loader ignores LD_PRELOAD for it, so nothing in it "
           "is guarded";
  return "";
}

}  // namespace mate::guard
