// Finding the symbol that contains an address in an ELF file's symbol table (see elf_symbols.hpp).
#include "guard/stack/elf_symbols.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mate::guard {

namespace {

// Raw system calls: open() and pread() are cancellation points, and this runs in reports.
bool read_at(int fd, std::uint64_t offset, void* out, std::size_t bytes) noexcept {
  auto* p = static_cast<unsigned char*>(out);
  while (bytes > 0) {
    const long got = syscall(SYS_pread64, fd, p, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    offset += static_cast<std::uint64_t>(got);
    bytes -= static_cast<std::size_t>(got);
  }
  return true;
}

bool is_code_symbol(const Elf64_Sym& sym) noexcept {
  const unsigned type = ELF64_ST_TYPE(sym.st_info);
  return sym.st_shndx != SHN_UNDEF && sym.st_size != 0 &&
         (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_NOTYPE);
}

// A global name is the one callers use; a local or weak alias at the same place only replaces
// a symbol of another kind.
int rank(const Elf64_Sym& sym) noexcept {
  const unsigned bind = ELF64_ST_BIND(sym.st_info);
  return (bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0) + (ELF64_ST_TYPE(sym.st_info) == STT_FUNC ? 4 : 0);
}

struct Best {
  bool found = false;
  Elf64_Sym sym{};
};

bool search(int fd, const std::uint64_t* addresses, int count, ContainingSymbol* out, unsigned char* buffer,
            std::size_t bytes) noexcept {
  Elf64_Ehdr eh;
  if (!read_at(fd, 0, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0)
    return false;
  // The section headers, a few at a time: the symbol table (.symtab, else .dynsym) and its strings.
  Elf64_Shdr table{}, strings{};
  bool have_table = false;
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    if (!read_at(fd, eh.e_shoff + std::uint64_t{i} * sizeof sh, &sh, sizeof sh)) return false;
    if (sh.sh_type == SHT_SYMTAB || (sh.sh_type == SHT_DYNSYM && !have_table)) {
      table = sh;
      have_table = true;
    }
  }
  if (!have_table || table.sh_entsize != sizeof(Elf64_Sym) || table.sh_link >= eh.e_shnum ||
      !read_at(fd, eh.e_shoff + std::uint64_t{table.sh_link} * sizeof strings, &strings, sizeof strings))
    return false;

  constexpr int kMax = 16;  // a backtrace's frames (kMaxFrames)
  Best best[kMax];
  if (count > kMax) count = kMax;
  const std::size_t per_read = bytes / sizeof(Elf64_Sym);
  if (per_read == 0) return false;
  const std::uint64_t total = table.sh_size / sizeof(Elf64_Sym);
  for (std::uint64_t first = 0; first < total; first += per_read) {
    const std::uint64_t n = total - first < per_read ? total - first : per_read;
    if (!read_at(fd, table.sh_offset + first * sizeof(Elf64_Sym), buffer, n * sizeof(Elf64_Sym))) return false;
    for (std::uint64_t k = 0; k < n; ++k) {
      Elf64_Sym sym;
      std::memcpy(&sym, buffer + k * sizeof sym, sizeof sym);
      if (!is_code_symbol(sym)) continue;
      for (int i = 0; i < count; ++i) {
        if (addresses[i] < sym.st_value || addresses[i] - sym.st_value >= sym.st_size) continue;
        // The innermost (latest start) containing symbol, then the better-ranked name.
        if (!best[i].found || sym.st_value > best[i].sym.st_value ||
            (sym.st_value == best[i].sym.st_value && rank(sym) > rank(best[i].sym))) {
          best[i].found = true;
          best[i].sym = sym;
        }
      }
    }
  }
  for (int i = 0; i < count; ++i) {
    if (!best[i].found || best[i].sym.st_name >= strings.sh_size) continue;
    ContainingSymbol& o = out[i];
    std::size_t length = sizeof o.name - 1;
    if (strings.sh_size - best[i].sym.st_name < length) length = strings.sh_size - best[i].sym.st_name;
    if (length == 0 || !read_at(fd, strings.sh_offset + best[i].sym.st_name, o.name, length)) continue;
    o.name[length] = '\0';  // the name ends at its NUL, or is cut here
    if (o.name[0] == '\0') continue;
    o.found = true;
    o.start = best[i].sym.st_value;
  }
  return true;
}

}  // namespace

bool find_containing_symbols(const char* path, const std::uint64_t* addresses, int count, ContainingSymbol* out,
                             unsigned char* buffer, std::size_t bytes) noexcept {
  for (int i = 0; i < count; ++i) out[i] = ContainingSymbol{};
  const int saved_errno = errno;
  const int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
  bool ok = false;
  if (fd >= 0) {
    ok = search(fd, addresses, count, out, buffer, bytes);
    syscall(SYS_close, fd);
  }
  errno = saved_errno;
  return ok;
}

}  // namespace mate::guard
