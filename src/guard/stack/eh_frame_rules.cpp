// Reading a return address's frame rule from its module's file: the .eh_frame_hdr binary
// search, the FDE and its CIE read with pread(), their CFA programs run to the call site
// (cfa_program.hpp), and the result checked against what the walk handles.
#include "guard/stack/unwind_rule.hpp"

#if defined(__x86_64__) && defined(__linux__)

#include <elf.h>
#include <sys/mman.h>

#include <cstring>

#include "guard/stack/cfa_program.hpp"
#include "guard/stack/elf_image.hpp"

namespace mate::guard::unwind {

namespace {

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

}  // namespace

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

}  // namespace mate::guard::unwind

#endif  // x86-64 Linux
