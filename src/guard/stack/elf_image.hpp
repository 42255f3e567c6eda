// The module (executable or shared library) a return address lies in, and its file read with
// pread(): the table unwinder's access to .eh_frame_hdr and .eh_frame without touching the
// mapped pages. A file is trusted only when its program headers, notes (the build id) and the
// bytes before the return address match what is mapped. x86-64 Linux.
#pragma once

#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && defined(__linux__)

namespace mate::guard::unwind {

constexpr int kMaxPhdrs = 16;

struct Module {
  std::uintptr_t pc = 0;  // what to look for
  bool found = false;
  ElfW(Addr) bias = 0;
  int phnum = 0;
  ElfW(Phdr) phdrs[kMaxPhdrs];  // a copy: the loader's may go with a concurrent dlclose
  bool named = false;            // a file path (not the vDSO's name), few enough headers
  int fd = -1;                   // its file, opened while the loader's lock keeps the name valid
};

// dl_iterate_phdr callback: fills the Module whose `pc` it is given (found, bias, headers, fd).
int find_module(struct dl_phdr_info* info, std::size_t, void* arg);
// dl_iterate_phdr callback: the loader's count of unloaded modules (dlpi_subs) into *arg.
int read_unloads(struct dl_phdr_info* info, std::size_t size, void* arg);

// Owns a file descriptor; reads with pread.
class File {
 public:
  explicit File(int fd) noexcept : fd_(fd) {}
  ~File() {
    if (fd_ >= 0) syscall(SYS_close, fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  bool ok() const noexcept { return fd_ >= 0; }
  // A read failed with an error (not the end of the file): the answer may differ next time.
  bool failed() const noexcept { return failed_; }
  bool read_at(std::uint64_t offset, void* out, std::size_t bytes) const noexcept {
    auto* p = static_cast<unsigned char*>(out);
    while (bytes > 0) {
      const long got = syscall(SYS_pread64, fd_, p, bytes, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) failed_ = true;
      if (got <= 0) return false;
      p += got;
      offset += static_cast<std::uint64_t>(got);
      bytes -= static_cast<std::size_t>(got);
    }
    return true;
  }

 private:
  int fd_;
  mutable bool failed_ = false;
};

// Where the module maps [vaddr, vaddr + bytes) (link-time addresses) from in its file; false
// when no loaded segment's file part holds all of it.
bool file_offset(const Module& m, ElfW(Addr) vaddr, std::size_t bytes, std::uint64_t* offset) noexcept;

// A module's file, addressed by link-time virtual address (what the tables' pointers use).
struct Image {
  const Module* module;
  const File* file;
  bool read(ElfW(Addr) vaddr, void* out, std::size_t bytes) const noexcept {
    std::uint64_t offset = 0;
    return file_offset(*module, vaddr, bytes, &offset) && file->read_at(offset, out, bytes);
  }
  // Reads up to `most` bytes at `vaddr`, fewer where its segment's file part ends; returns how
  // many (0: none). One read where a record's length is not known yet.
  std::size_t read_up_to(ElfW(Addr) vaddr, void* out, std::size_t most) const noexcept {
    for (int i = 0; i < module->phnum; ++i) {
      const ElfW(Phdr)& ph = module->phdrs[i];
      if (ph.p_type != PT_LOAD || vaddr < ph.p_vaddr || vaddr - ph.p_vaddr >= ph.p_filesz) continue;
      const std::size_t left = ph.p_filesz - (vaddr - ph.p_vaddr);
      const std::size_t bytes = most < left ? most : left;
      return file->read_at(ph.p_offset + (vaddr - ph.p_vaddr), out, bytes) ? bytes : 0;
    }
    return 0;
  }
};

// Reads the .eh_frame record (CIE or FDE: a 4-byte length, then that many bytes) at `at` into
// `out` (`capacity` bytes) with one read when it is no longer than `first` bytes, two otherwise.
// Returns its length field; 0 when it does not fit or cannot be read.
std::uint32_t read_record(const Image& image, ElfW(Addr) at, unsigned char* out, std::size_t capacity,
                          std::size_t first) noexcept;

// The file is the one mapped: the same program headers and the same notes (the build id, when
// it has one), read from the file and from memory. A library rebuilt or replaced since it was
// loaded would otherwise give another program's rules.
bool is_mapped_file(const Module& m, const File& file) noexcept;

// The bytes before return address `pc` (its call instruction) are the same in the file: a
// rebuilt library with the same headers and no build id still differs there. Only bytes of the
// page holding pc - 1, which the call was just executed from, are read from memory.
bool call_site_matches(const Module& m, const File& file, std::uintptr_t pc) noexcept;

}  // namespace mate::guard::unwind

#endif  // x86-64 Linux
