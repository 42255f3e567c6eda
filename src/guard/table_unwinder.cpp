#include "table_unwinder.hpp"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace mate::guard {

namespace {

// Counted on cache misses only: the walk with a warm cache writes no shared memory.
std::atomic<std::uint64_t> g_table_reads{0};
std::atomic<std::uint64_t> g_unsupported{0};

}  // namespace

#if defined(__x86_64__) && defined(__linux__)
namespace {

// ---- A frame's rule, and its cache ----

// Where the caller's frame is, for one return address: CFA = (rbp or rsp) + cfa_offset, the
// return address at CFA-8 (checked when read), rbp saved at CFA - rbp_saved_at (0: unchanged).
struct Rule {
  enum Kind : std::uint8_t { kFrame, kOutermost, kUnsupported } kind = kUnsupported;
  bool cfa_from_rbp = false;
  std::uint32_t cfa_offset = 0;
  std::uint32_t rbp_saved_at = 0;
  bool cacheable = true;  // false for an unsupported answer that may change (an I/O error)
};

// One 64-bit word an entry, so entries never tear between threads: the return address in the low
// 47 bits (user-space addresses on x86-64), the rule in the high 17: bit 0 CFA from rbp, bits
// 1-12 the CFA offset in 8-byte units, bits 13-16 rbp's save slot in 8-byte units; a CFA offset
// of 0 marks the outermost frame (bit 0 clear) or an unsupported one (bit 0 set). Rules that do
// not fit (frames over 32 KiB) are not cached. 0 = empty.
constexpr unsigned kPcBits = 47;
constexpr std::uint64_t kPcMask = (std::uint64_t{1} << kPcBits) - 1;
constexpr std::size_t kCacheEntries = 2048;  // 16 KiB
constexpr std::size_t kWays = 4;              // a set is 32 bytes, in one cache line
alignas(64) std::atomic<std::uint64_t> g_cache[kCacheEntries];
std::atomic<unsigned> g_next_way{0};
// The loader's count of unloaded modules when the cache was last emptied: an unload can put other
// code at a cached address.
std::atomic<unsigned long long> g_unloads_seen{0};

std::size_t cache_set(std::uintptr_t pc) noexcept {
  std::uint64_t h = pc * 0x9e3779b97f4a7c15ull;
  return static_cast<std::size_t>(h >> 40) & (kCacheEntries - kWays);
}

bool cache_find(std::uintptr_t pc, Rule* rule) noexcept {
  const std::size_t set = cache_set(pc);
  for (std::size_t way = 0; way < kWays; ++way) {
    const std::uint64_t e = g_cache[set + way].load(std::memory_order_relaxed);
    if (e == 0 || (e & kPcMask) != pc) continue;
    const auto bits = static_cast<std::uint32_t>(e >> kPcBits);
    const std::uint32_t cfa_units = (bits >> 1) & 0xfff;
    if (cfa_units == 0) {
      rule->kind = (bits & 1) != 0 ? Rule::kUnsupported : Rule::kOutermost;
      return true;
    }
    rule->kind = Rule::kFrame;
    rule->cfa_from_rbp = (bits & 1) != 0;
    rule->cfa_offset = cfa_units * 8;
    rule->rbp_saved_at = ((bits >> 13) & 0xf) * 8;
    return true;
  }
  return false;
}

// Stores `rule` in one way of its set (an empty one, else the next in turn), when it fits.
void cache_put(std::uintptr_t pc, const Rule& rule) noexcept {
  if (pc == 0 || (pc & ~kPcMask) != 0) return;
  std::uint32_t bits = 0;
  if (rule.kind == Rule::kFrame) {
    if (rule.cfa_offset == 0 || rule.cfa_offset % 8 != 0 || rule.cfa_offset / 8 > 0xfff) return;
    if (rule.rbp_saved_at % 8 != 0 || rule.rbp_saved_at / 8 > 0xf) return;
    bits = (rule.cfa_from_rbp ? 1u : 0u) | (rule.cfa_offset / 8) << 1 | (rule.rbp_saved_at / 8) << 13;
  } else if (rule.kind == Rule::kUnsupported) {
    if (!rule.cacheable) return;
    bits = 1;  // remembered too: such a frame's walk goes to the C++ unwinder without reading again
  }
  const std::uint64_t entry = pc | std::uint64_t{bits} << kPcBits;
  const std::size_t set = cache_set(pc);
  std::size_t way = 0;
  while (way < kWays && g_cache[set + way].load(std::memory_order_relaxed) != 0) ++way;
  if (way == kWays) way = g_next_way.fetch_add(1, std::memory_order_relaxed) % kWays;
  // Only this entry is written: copying others around could bring back one a concurrent
  // clear_cache() had removed.
  g_cache[set + way].store(entry, std::memory_order_relaxed);
}

void clear_cache() noexcept {
  for (auto& e : g_cache) e.store(0, std::memory_order_relaxed);
}

// ---- The module a return address lies in ----

constexpr int kMaxPhdrs = 16;

// Raw system calls: open() and pread() are cancellation points, and a thread must not be
// cancelled inside malloc.
int open_read_only(const char* path) noexcept {
  return static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
}

struct Module {
  std::uintptr_t pc = 0;  // what to look for
  bool found = false;
  ElfW(Addr) bias = 0;
  int phnum = 0;
  ElfW(Phdr) phdrs[kMaxPhdrs];  // a copy: the loader's may go with a concurrent dlclose
  bool named = false;            // a file path (not the vDSO's name), few enough headers
  int fd = -1;                   // its file, opened while the loader's lock keeps the name valid
};

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

// ---- Reading the module's file ----

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

// ---- DWARF call-frame information (.eh_frame, the LSB's form of DWARF .debug_frame) ----

constexpr unsigned kRbp = 6;
constexpr unsigned kRsp = 7;
constexpr unsigned kReturnAddress = 16;

// A bounded cursor over bytes read from the file.
struct Cursor {
  const unsigned char* p;
  const unsigned char* end;
  ElfW(Addr) vaddr;  // of p, for pc-relative pointers
  bool ok = true;

  void skip(std::size_t n) noexcept {
    if (static_cast<std::size_t>(end - p) < n) {
      ok = false;
      p = end;
      return;
    }
    p += n;
    vaddr += n;
  }
  std::uint8_t u8() noexcept {
    if (p >= end) {
      ok = false;
      return 0;
    }
    ++vaddr;
    return *p++;
  }
  template <typename T>
  T fixed() noexcept {
    T v{};
    if (static_cast<std::size_t>(end - p) < sizeof v) {
      ok = false;
      p = end;
      return v;
    }
    std::memcpy(&v, p, sizeof v);
    skip(sizeof v);
    return v;
  }
  std::uint64_t uleb() noexcept {
    std::uint64_t v = 0;
    for (unsigned shift = 0; ok; shift += 7) {
      const std::uint8_t b = u8();
      if (shift < 64) v |= std::uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) break;
    }
    return v;
  }
  std::int64_t sleb() noexcept {
    std::int64_t v = 0;
    unsigned shift = 0;
    std::uint8_t b = 0;
    do {
      b = u8();
      if (shift < 64) v |= static_cast<std::int64_t>(std::uint64_t{b & 0x7fu} << shift);
      shift += 7;
    } while (ok && (b & 0x80) != 0);
    if (shift < 64 && (b & 0x40) != 0) v |= static_cast<std::int64_t>(~std::uint64_t{0} << shift);
    return v;
  }
  // A pointer in DW_EH_PE encoding `enc`: absolute or pc-relative (what .eh_frame uses for
  // code addresses); `datarel_base` for data-relative ones (.eh_frame_hdr's table).
  bool pointer(std::uint8_t enc, ElfW(Addr)* out, ElfW(Addr) datarel_base = 0) noexcept {
    if (enc == 0xff) return false;  // DW_EH_PE_omit
    const ElfW(Addr) field = vaddr;
    std::uint64_t v = 0;
    switch (enc & 0x0f) {
      case 0x00:  // absptr
      case 0x04:
      case 0x0c: v = fixed<std::uint64_t>(); break;
      case 0x01: v = uleb(); break;
      case 0x02: v = fixed<std::uint16_t>(); break;
      case 0x03: v = fixed<std::uint32_t>(); break;
      case 0x09: v = static_cast<std::uint64_t>(sleb()); break;
      case 0x0a: v = static_cast<std::uint64_t>(static_cast<std::int64_t>(fixed<std::int16_t>())); break;
      case 0x0b: v = static_cast<std::uint64_t>(static_cast<std::int64_t>(fixed<std::int32_t>())); break;
      default: return false;
    }
    switch (enc & 0x70) {
      case 0x00: break;
      case 0x10: v += field; break;         // pcrel
      case 0x30: v += datarel_base; break;  // datarel
      default: return false;
    }
    if ((enc & 0x80) != 0) return false;  // indirect: never for code addresses
    *out = v;
    return ok;
  }
};

// The part of a frame's register rules the walk needs.
struct RegisterRules {
  unsigned cfa_register = kRsp;
  std::int64_t cfa_offset = 0;
  bool cfa_supported = true;  // false after a CFA expression
  enum Kind : std::uint8_t { kSame, kUndefined, kOffset, kOther };
  Kind rbp = kSame;
  std::int64_t rbp_offset = 0;
  Kind ra = kSame;
  std::int64_t ra_offset = 0;
};

struct Cie {
  std::uint64_t code_align = 1;
  std::int64_t data_align = 1;
  std::uint8_t fde_encoding = 0;  // absptr
  bool has_augmentation_data = false;
  const unsigned char* instructions = nullptr;
  const unsigned char* end = nullptr;
  ElfW(Addr) instructions_vaddr = 0;
};

bool parse_cie(const unsigned char* data, std::size_t bytes, ElfW(Addr) vaddr, Cie* cie) noexcept {
  Cursor c{data, data + bytes, vaddr};
  c.skip(4);  // length
  if (c.fixed<std::uint32_t>() != 0) return false;  // CIE id
  const std::uint8_t version = c.u8();
  if (version != 1 && version != 3) return false;
  const char* augmentation = reinterpret_cast<const char*>(c.p);
  const void* nul = std::memchr(c.p, '\0', static_cast<std::size_t>(c.end - c.p));
  if (nul == nullptr) return false;
  c.skip(static_cast<std::size_t>(static_cast<const unsigned char*>(nul) - c.p) + 1);
  if (augmentation[0] != '\0' && augmentation[0] != 'z') return false;  // "eh" and the like
  cie->code_align = c.uleb();
  cie->data_align = c.sleb();
  const std::uint64_t ra = version == 1 ? c.u8() : c.uleb();
  if (ra != kReturnAddress) return false;
  if (augmentation[0] == 'z') {
    cie->has_augmentation_data = true;
    const std::uint64_t length = c.uleb();
    if (!c.ok || length > static_cast<std::uint64_t>(c.end - c.p)) return false;
    Cursor a{c.p, c.p + length, c.vaddr};
    for (const char* k = augmentation + 1; *k != '\0'; ++k) {
      if (*k == 'R') {
        cie->fde_encoding = a.u8();
      } else if (*k == 'L') {
        (void)a.u8();
      } else if (*k == 'P') {
        const std::uint8_t enc = a.u8();
        ElfW(Addr) ignored = 0;
        // The personality routine's pointer: only its size matters here.
        if (!a.pointer(static_cast<std::uint8_t>(enc & 0x7f), &ignored, 0)) return false;
      } else if (*k == 'S') {
        return false;  // a signal frame: the C++ unwinder knows its layout
      } else if (*k != 'B') {
        return false;
      }
    }
    if (!a.ok) return false;
    c.skip(length);
  }
  cie->instructions = c.p;
  cie->end = c.end;
  cie->instructions_vaddr = c.vaddr;
  return c.ok;
}

// Runs a CFA program until the location passes `target`. `initial` is the CIE's rules (for
// DW_CFA_restore), null while running the CIE's own instructions.
bool run_cfa_program(Cursor c, const Cie& cie, ElfW(Addr) location, ElfW(Addr) target, const RegisterRules* initial,
                     RegisterRules* rules) noexcept {
  constexpr int kStateDepth = 8;
  RegisterRules remembered[kStateDepth];
  int depth = 0;
  auto set_offset = [&](std::uint64_t reg, std::int64_t offset) {
    if (reg == kRbp) {
      rules->rbp = RegisterRules::kOffset;
      rules->rbp_offset = offset;
    } else if (reg == kReturnAddress) {
      rules->ra = RegisterRules::kOffset;
      rules->ra_offset = offset;
    }
  };
  auto set_kind = [&](std::uint64_t reg, RegisterRules::Kind kind) {
    if (reg == kRbp) rules->rbp = kind;
    if (reg == kReturnAddress) rules->ra = kind;
  };
  auto restore = [&](std::uint64_t reg) {
    if (initial == nullptr) return false;
    if (reg == kRbp) {
      rules->rbp = initial->rbp;
      rules->rbp_offset = initial->rbp_offset;
    } else if (reg == kReturnAddress) {
      rules->ra = initial->ra;
      rules->ra_offset = initial->ra_offset;
    }
    return true;
  };
  auto advance = [&](std::uint64_t delta) {
    location += delta * cie.code_align;
    return location <= target;
  };
  while (c.ok && c.p < c.end) {
    const std::uint8_t op = c.u8();
    switch (op >> 6) {
      case 1:  // DW_CFA_advance_loc
        if (!advance(op & 0x3f)) return true;
        continue;
      case 2:  // DW_CFA_offset
        set_offset(op & 0x3f, static_cast<std::int64_t>(c.uleb()) * cie.data_align);
        continue;
      case 3:  // DW_CFA_restore
        if (!restore(op & 0x3f)) return false;
        continue;
      default: break;
    }
    switch (op) {
      case 0x00: break;  // nop
      case 0x01: {       // set_loc
        ElfW(Addr) to = 0;
        if (!c.pointer(cie.fde_encoding, &to)) return false;
        location = to;
        if (location > target) return true;
        break;
      }
      case 0x02:
        if (!advance(c.u8())) return true;
        break;
      case 0x03:
        if (!advance(c.fixed<std::uint16_t>())) return true;
        break;
      case 0x04:
        if (!advance(c.fixed<std::uint32_t>())) return true;
        break;
      case 0x05: {  // offset_extended
        const std::uint64_t reg = c.uleb();
        set_offset(reg, static_cast<std::int64_t>(c.uleb()) * cie.data_align);
        break;
      }
      case 0x06:  // restore_extended
        if (!restore(c.uleb())) return false;
        break;
      case 0x07:  // undefined
        set_kind(c.uleb(), RegisterRules::kUndefined);
        break;
      case 0x08:  // same_value
        set_kind(c.uleb(), RegisterRules::kSame);
        break;
      case 0x09: {  // register
        const std::uint64_t reg = c.uleb();
        (void)c.uleb();
        set_kind(reg, RegisterRules::kOther);
        break;
      }
      case 0x0a:  // remember_state
        if (depth == kStateDepth) return false;
        remembered[depth++] = *rules;
        break;
      case 0x0b:  // restore_state
        if (depth == 0) return false;
        *rules = remembered[--depth];
        break;
      case 0x0c:  // def_cfa
        rules->cfa_register = static_cast<unsigned>(c.uleb());
        rules->cfa_offset = static_cast<std::int64_t>(c.uleb());
        rules->cfa_supported = true;
        break;
      case 0x0d:  // def_cfa_register
        rules->cfa_register = static_cast<unsigned>(c.uleb());
        break;
      case 0x0e:  // def_cfa_offset
        rules->cfa_offset = static_cast<std::int64_t>(c.uleb());
        break;
      case 0x0f:  // def_cfa_expression
        c.skip(c.uleb());
        rules->cfa_supported = false;
        break;
      case 0x10: {  // expression
        const std::uint64_t reg = c.uleb();
        c.skip(c.uleb());
        set_kind(reg, RegisterRules::kOther);
        break;
      }
      case 0x11: {  // offset_extended_sf
        const std::uint64_t reg = c.uleb();
        set_offset(reg, c.sleb() * cie.data_align);
        break;
      }
      case 0x12:  // def_cfa_sf
        rules->cfa_register = static_cast<unsigned>(c.uleb());
        rules->cfa_offset = c.sleb() * cie.data_align;
        rules->cfa_supported = true;
        break;
      case 0x13:  // def_cfa_offset_sf
        rules->cfa_offset = c.sleb() * cie.data_align;
        break;
      case 0x14:    // val_offset
      case 0x15: {  // val_offset_sf
        const std::uint64_t reg = c.uleb();
        if (op == 0x14) (void)c.uleb(); else (void)c.sleb();
        set_kind(reg, RegisterRules::kOther);
        break;
      }
      case 0x16: {  // val_expression
        const std::uint64_t reg = c.uleb();
        c.skip(c.uleb());
        set_kind(reg, RegisterRules::kOther);
        break;
      }
      case 0x2e:  // GNU_args_size
        (void)c.uleb();
        break;
      case 0x2f: {  // GNU_negative_offset_extended
        const std::uint64_t reg = c.uleb();
        set_offset(reg, -static_cast<std::int64_t>(c.uleb()) * cie.data_align);
        break;
      }
      default: return false;
    }
  }
  return c.ok;
}

// A return address in a module's code that no table entry covers (hand-written assembly such as
// the loader's _dl_start_user): the C++ unwinder ends the stack there too, unless the code is a
// signal-return trampoline (mov $15, %rax; syscall), which it recognizes by its bytes.
Rule no_table_entry(const Module& m, std::uintptr_t pc) noexcept {
  static constexpr unsigned char kRtSigreturn[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  for (int i = 0; i < m.phnum; ++i) {  // the bytes are read only where the module maps them
    const ElfW(Phdr)& ph = m.phdrs[i];
    const std::uintptr_t start = m.bias + ph.p_vaddr;
    if (ph.p_type != PT_LOAD || pc < start || pc - start + sizeof kRtSigreturn > ph.p_memsz) continue;
    if (std::memcmp(reinterpret_cast<const void*>(pc), kRtSigreturn, sizeof kRtSigreturn) == 0) return {};
  }
  Rule rule;
  rule.kind = Rule::kOutermost;
  return rule;
}

// The largest FDE read (a frame description's CFA program grows with its function's code).
constexpr std::uint32_t kMaxFdeBytes = std::uint32_t{1} << 20;

// Anonymous read-write memory for the walk's larger reads, unmapped at the end of the scope.
struct ScratchMapping {
  ScratchMapping() noexcept = default;
  // `bytes` stays null when the system refuses the mapping. Once.
  void map(std::size_t n) noexcept {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    bytes = static_cast<unsigned char*>(p);
    size = n;
  }
  ~ScratchMapping() {
    if (bytes != nullptr) ::munmap(bytes, size);
  }
  ScratchMapping(const ScratchMapping&) = delete;
  ScratchMapping& operator=(const ScratchMapping&) = delete;
  unsigned char* bytes = nullptr;
  std::size_t size = 0;
};

// The rule for return address `pc` (in module `m`, whose file is `file`), from the tables.
Rule rule_from_tables(const Module& m, const File& file, std::uintptr_t pc) noexcept {
  const Image image{&m, &file};
  const ElfW(Phdr)* hdr_ph = nullptr;
  for (int i = 0; i < m.phnum; ++i)
    if (m.phdrs[i].p_type == PT_GNU_EH_FRAME) hdr_ph = &m.phdrs[i];
  if (hdr_ph == nullptr) return {};
  // .eh_frame_hdr: version, three encodings, the .eh_frame pointer, the count, then a table of
  // (initial location, FDE address) pairs sorted by location, both relative to the header.
  unsigned char head[16];
  if (hdr_ph->p_filesz < sizeof head || !file.read_at(hdr_ph->p_offset, head, sizeof head)) return {};
  const ElfW(Addr) hdr = hdr_ph->p_vaddr;
  if (head[0] != 1 || head[3] != 0x3b) return {};  // table: datarel | sdata4
  Cursor h{head + 4, head + sizeof head, hdr + 4};
  ElfW(Addr) eh_frame = 0;
  ElfW(Addr) count = 0;
  if (!h.pointer(head[1], &eh_frame, hdr) || !h.pointer(head[2], &count, hdr)) return {};
  const ElfW(Addr) table = h.vaddr;
  if (count == 0) return {};
  const ElfW(Addr) target = pc - 1 - m.bias;  // the call instruction, in link-time addresses
  // The last entry whose location is at or below the target: narrowed one entry a read to
  // kChunk entries, which are then read at once (a table of 10,000 takes 8 reads, not 15), into
  // the buffer the FDE is read into next.
  const auto at_or_below = [&](std::int32_t location) {
    return hdr + static_cast<ElfW(Addr)>(static_cast<std::int64_t>(location)) <= target;
  };
  constexpr std::uint64_t kChunk = 128;
  std::uint64_t lo = 0;
  std::uint64_t hi = count;
  unsigned char stack_bytes[2048];
  static_assert(sizeof stack_bytes >= kChunk * 8, "the search's last entries fit the FDE buffer");
  const auto entry = [&](std::uint64_t i, int field) {  // of those read into stack_bytes
    std::int32_t v;
    std::memcpy(&v, stack_bytes + i * 8 + static_cast<std::size_t>(field) * 4, 4);
    return v;
  };
  while (hi - lo > kChunk) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    std::int32_t location = 0;
    if (!image.read(table + mid * 8, &location, 4)) return {};
    if (at_or_below(location)) lo = mid; else hi = mid;
  }
  if (!image.read(table + lo * 8, stack_bytes, (hi - lo) * 8)) return {};
  std::uint64_t last = 0;  // entry lo is at or below, unless no entry is (lo == 0)
  while (last + 1 < hi - lo && at_or_below(entry(last + 1, 0))) ++last;
  if (!at_or_below(entry(last, 0))) return no_table_entry(m, pc);
  const ElfW(Addr) fde = hdr + static_cast<ElfW(Addr)>(static_cast<std::int64_t>(entry(last, 1)));

  // Most FDEs are under 256 bytes (one read) and all but a very large function's fit on the
  // stack; those (cc1plus has 14 over 2 KiB, up to 20 KiB: its allocations went to the C++
  // unwinder, which paged its tables in) are read into a mapping of their own: no malloc here.
  unsigned char* fde_bytes = stack_bytes;
  std::uint32_t length = read_record(image, fde, stack_bytes, sizeof stack_bytes, 256);
  ScratchMapping large;
  if (length == 0) {
    if (!image.read(fde, &length, 4) || length < 8 || length > kMaxFdeBytes) return {};
    if (length + 4 <= sizeof stack_bytes) return {};  // it fitted, and could not be read
    large.map(length + 4);
    if (large.bytes == nullptr) {
      Rule no_memory;  // the C++ unwinder walks this time; asked again next time
      no_memory.cacheable = false;
      return no_memory;
    }
    fde_bytes = large.bytes;
    if (!image.read(fde, fde_bytes, length + 4)) return {};
  }
  std::uint32_t cie_pointer = 0;
  std::memcpy(&cie_pointer, fde_bytes + 4, 4);
  const ElfW(Addr) cie_at = fde + 4 - cie_pointer;
  unsigned char cie_bytes[512];
  const std::uint32_t cie_length = read_record(image, cie_at, cie_bytes, sizeof cie_bytes, 128);
  if (cie_length < 9) return {};
  Cie cie;
  if (!parse_cie(cie_bytes, cie_length + 4, cie_at, &cie)) return {};

  Cursor f{fde_bytes + 8, fde_bytes + length + 4, fde + 8};
  ElfW(Addr) begin = 0;
  ElfW(Addr) range = 0;
  if (!f.pointer(cie.fde_encoding, &begin) || !f.pointer(cie.fde_encoding & 0x0f, &range)) return {};
  if (target < begin || target - begin >= range) return no_table_entry(m, pc);
  if (cie.has_augmentation_data) f.skip(f.uleb());
  if (!f.ok) return {};

  RegisterRules initial;
  if (!run_cfa_program(Cursor{cie.instructions, cie.end, cie.instructions_vaddr}, cie, begin, target, nullptr,
                       &initial))
    return {};
  RegisterRules rules = initial;
  if (!run_cfa_program(f, cie, begin, target, &initial, &rules)) return {};

  Rule rule;
  if (rules.ra == RegisterRules::kUndefined) {  // the outermost frame (_start, a thread's start)
    rule.kind = Rule::kOutermost;
    return rule;
  }
  if (!rules.cfa_supported || (rules.cfa_register != kRsp && rules.cfa_register != kRbp) || rules.cfa_offset <= 0 ||
      rules.cfa_offset > 0x7fffffff)
    return {};
  if (rules.ra != RegisterRules::kOffset || rules.ra_offset != -8) return {};
  if (rules.rbp == RegisterRules::kOffset) {
    if (rules.rbp_offset >= 0 || rules.rbp_offset < -0x7fffffff) return {};
    rule.rbp_saved_at = static_cast<std::uint32_t>(-rules.rbp_offset);
  } else if (rules.rbp != RegisterRules::kSame) {
    return {};
  }
  rule.kind = Rule::kFrame;
  rule.cfa_from_rbp = rules.cfa_register == kRbp;
  rule.cfa_offset = static_cast<std::uint32_t>(rules.cfa_offset);
  return rule;
}

Rule read_rule(std::uintptr_t pc) noexcept {
  Module m;
  m.pc = pc - 1;
  dl_iterate_phdr(find_module, &m);
  const File file(m.fd);
  // Code in no module (JIT code registers its tables with the C++ unwinder), the vDSO, a file
  // that is not the one mapped: the C++ unwinder walks.
  Rule rule;
  if (m.found && m.named && file.ok() && is_mapped_file(m, file) && call_site_matches(m, file, pc))
    rule = rule_from_tables(m, file, pc);
  // Not remembered where the answer may change: code in no module (a library may be loaded
  // there later), a file that could not be opened or read (no descriptor free, an I/O error).
  if (rule.kind == Rule::kUnsupported && (!m.found || (m.named && (!file.ok() || file.failed()))))
    rule.cacheable = false;
  return rule;
}

}  // namespace
#endif

__attribute__((no_sanitize("address"))) TableWalk walk_with_unwind_tables(std::uintptr_t pc, std::uintptr_t sp,
                                                                        std::uintptr_t fp, void** frames, int max,
                                                                        int* n) noexcept {
  *n = 0;
#if defined(__x86_64__) && defined(__linux__)
  const int saved_errno = errno;
  // The loader's lock, once a walk (the C++ unwinder takes it too, or uses _dl_find_object).
  unsigned long long unloads = 0;
  dl_iterate_phdr(read_unloads, &unloads);
  if (unloads != g_unloads_seen.load(std::memory_order_acquire)) {
    // The entries first, then the count: a walk that sees the new count finds no entry the
    // unload made stale. (Flushes that race only clear twice.)
    clear_cache();
    g_unloads_seen.store(unloads, std::memory_order_release);
  }
  TableWalk result = TableWalk::kComplete;
  std::uint64_t read = 0;
  while (*n < max && pc != 0) {
    frames[(*n)++] = reinterpret_cast<void*>(pc);
    if (*n == max) break;
    Rule rule;
    if (!cache_find(pc, &rule)) {
      rule = read_rule(pc);
      ++read;
      // Still valid when stored, even across a concurrent flush: `pc` is on this thread's stack,
      // so its module cannot have been unloaded.
      cache_put(pc, rule);
    }
    if (rule.kind == Rule::kOutermost) break;
    if (rule.kind == Rule::kUnsupported) {
      result = TableWalk::kUnsupported;
      break;
    }
    const std::uintptr_t cfa = (rule.cfa_from_rbp ? fp : sp) + rule.cfa_offset;
    // Each caller's frame lies above its callee's, within a stack: anything else is a rule
    // that does not describe this stack.
    if (cfa <= sp || cfa - sp > (std::uintptr_t{1} << 30)) {
      result = TableWalk::kUnsupported;
      break;
    }
    if (rule.rbp_saved_at != 0) fp = *reinterpret_cast<const std::uintptr_t*>(cfa - rule.rbp_saved_at);
    pc = *reinterpret_cast<const std::uintptr_t*>(cfa - 8);
    sp = cfa;
  }
  if (read != 0) g_table_reads.fetch_add(read, std::memory_order_relaxed);
  if (result == TableWalk::kUnsupported) g_unsupported.fetch_add(1, std::memory_order_relaxed);
  errno = saved_errno;
  return result;
#else
  (void)pc, (void)sp, (void)fp, (void)frames, (void)max;
  g_unsupported.fetch_add(1, std::memory_order_relaxed);
  return TableWalk::kUnsupported;
#endif
}

TableUnwinderStats table_unwinder_stats() noexcept {
  return {g_table_reads.load(std::memory_order_relaxed), g_unsupported.load(std::memory_order_relaxed)};
}

void clear_table_unwinder_cache() noexcept {
#if defined(__x86_64__) && defined(__linux__)
  clear_cache();
#endif
}

}  // namespace mate::guard
