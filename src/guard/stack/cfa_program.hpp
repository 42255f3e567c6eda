// DWARF call-frame information as .eh_frame holds it (the LSB's form of DWARF .debug_frame): a
// bounded cursor over a record's bytes, the CIE's fields, and the CFA program interpreter that
// yields the register rules the table unwinder needs (CFA, rbp, return address). x86-64 Linux.
#pragma once

#include <link.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)

namespace mate::guard::unwind {

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

// Parses the CIE record at `data` (`bytes` bytes, the length field included; at link-time
// address `vaddr`); false for what the walk does not handle (signal frames, unknown
// augmentations, another return-address column).
bool parse_cie(const unsigned char* data, std::size_t bytes, ElfW(Addr) vaddr, Cie* cie) noexcept;

// Runs a CFA program until the location passes `target`. `initial` is the CIE's rules (for
// DW_CFA_restore), null while running the CIE's own instructions.
bool run_cfa_program(Cursor c, const Cie& cie, ElfW(Addr) location, ElfW(Addr) target, const RegisterRules* initial,
                     RegisterRules* rules) noexcept;

}  // namespace mate::guard::unwind

#endif  // x86-64 Linux
