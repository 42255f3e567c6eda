// Finding a return address's module (dl_iterate_phdr) and checking that its file is the one
// mapped (see elf_image.hpp).
#include "guard/stack/elf_image.hpp"

#if defined(__x86_64__) && defined(__linux__)

#include <elf.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace mate::guard::unwind {

namespace {

// Raw system calls: open() and pread() are cancellation points, and a thread must not be
// cancelled inside malloc.
int open_read_only(const char* path) noexcept {
  return static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
}

// True when `bytes` bytes of the file at `offset` equal those mapped at `memory`.
bool file_matches_memory(const File& file, std::uint64_t offset, std::uintptr_t memory, std::size_t bytes) noexcept {
  unsigned char chunk[1024];  // a module's program headers (~13 x 56 bytes) in one read
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = bytes - done < sizeof chunk ? bytes - done : sizeof chunk;
    if (!file.read_at(offset + done, chunk, n) ||
        std::memcmp(chunk, reinterpret_cast<const void*>(memory + done), n) != 0)
      return false;
    done += n;
  }
  return true;
}

}  // namespace

int find_module(struct dl_phdr_info* info, std::size_t, void* arg) {
  auto* m = static_cast<Module*>(arg);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (m->pc < start || m->pc - start >= ph.p_memsz) continue;
    m->found = true;
    m->bias = info->dlpi_addr;
    const char* name = info->dlpi_name;
    // The main program has no name; its file is /proc/self/exe, whatever its path is now.
    if (name == nullptr || name[0] == '\0') name = "/proc/self/exe";
    // Only absolute paths: a relative one means another directory since, and the vDSO has none.
    if (name[0] != '/' || info->dlpi_phnum > kMaxPhdrs) return 1;
    m->phnum = info->dlpi_phnum;
    std::memcpy(m->phdrs, info->dlpi_phdr, sizeof(ElfW(Phdr)) * static_cast<std::size_t>(m->phnum));
    m->named = true;
    m->fd = open_read_only(name);
    return 1;
  }
  return 0;
}

int read_unloads(struct dl_phdr_info* info, std::size_t size, void* arg) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
    *static_cast<unsigned long long*>(arg) = info->dlpi_subs;
  return 1;
}

// Where the module maps [vaddr, vaddr + bytes) (link-time addresses) from in its file; false
// when no loaded segment's file part holds all of it.
bool file_offset(const Module& m, ElfW(Addr) vaddr, std::size_t bytes, std::uint64_t* offset) noexcept {
  for (int i = 0; i < m.phnum; ++i) {
    const ElfW(Phdr)& ph = m.phdrs[i];
    if (ph.p_type != PT_LOAD || vaddr < ph.p_vaddr || vaddr - ph.p_vaddr >= ph.p_filesz) continue;
    if (vaddr - ph.p_vaddr + bytes > ph.p_filesz) return false;
    *offset = ph.p_offset + (vaddr - ph.p_vaddr);
    return true;
  }
  return false;
}

// Reads the .eh_frame record (CIE or FDE: a 4-byte length, then that many bytes) at `at` into
// `out` (`capacity` bytes) with one read when it is no longer than `first` bytes, two otherwise.
// Returns its length field; 0 when it does not fit or cannot be read.
std::uint32_t read_record(const Image& image, ElfW(Addr) at, unsigned char* out, std::size_t capacity,
                          std::size_t first) noexcept {
  const std::size_t got = image.read_up_to(at, out, first < capacity ? first : capacity);
  std::uint32_t length = 0;
  if (got < 4) return 0;
  std::memcpy(&length, out, 4);
  if (length < 8 || std::size_t{length} + 4 > capacity) return 0;
  // Longer than the first read: read again whole, within one segment's file part.
  if (std::size_t{length} + 4 > got && !image.read(at, out, length + 4)) return 0;
  return length;
}

// The file is the one mapped: the same program headers and the same notes (the build id, when
// it has one), read from the file and from memory. A library rebuilt or replaced since it was
// loaded would otherwise give another program's rules.
bool is_mapped_file(const Module& m, const File& file) noexcept {
  ElfW(Ehdr) eh;
  if (!file.read_at(0, &eh, sizeof eh)) return false;
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum != m.phnum)
    return false;
  if (!file_matches_memory(file, eh.e_phoff, reinterpret_cast<std::uintptr_t>(m.phdrs),
                           sizeof(ElfW(Phdr)) * static_cast<std::size_t>(m.phnum)))
    return false;
  for (int i = 0; i < m.phnum; ++i) {
    const ElfW(Phdr)& ph = m.phdrs[i];
    if (ph.p_type != PT_NOTE) continue;
    const std::size_t bytes = ph.p_filesz < 512 ? ph.p_filesz : 512;
    std::uint64_t mapped_from = 0;
    if (!file_offset(m, ph.p_vaddr, bytes, &mapped_from) ||
        !file_matches_memory(file, mapped_from, m.bias + ph.p_vaddr, bytes))
      return false;
  }
  return true;
}

// The bytes before return address `pc` (its call instruction) are the same in the file: a
// rebuilt library with the same headers and no build id still differs there. Only bytes of the
// page holding pc - 1, which the call was just executed from, are read from memory.
bool call_site_matches(const Module& m, const File& file, std::uintptr_t pc) noexcept {
  std::size_t bytes = ((pc - 1) & 0xfff) + 1;  // to the start of pc - 1's page
  if (bytes > 8) bytes = 8;
  const ElfW(Addr) last = pc - 1 - m.bias;
  for (int i = 0; i < m.phnum; ++i) {  // and to the start of its segment
    const ElfW(Phdr)& ph = m.phdrs[i];
    if (ph.p_type == PT_LOAD && last >= ph.p_vaddr && last - ph.p_vaddr < ph.p_filesz && last - ph.p_vaddr + 1 < bytes)
      bytes = last - ph.p_vaddr + 1;
  }
  std::uint64_t offset = 0;
  return file_offset(m, pc - bytes - m.bias, bytes, &offset) && file_matches_memory(file, offset, pc - bytes, bytes);
}

}  // namespace mate::guard::unwind

#endif  // x86-64 Linux
