// The CIE parser and the CFA program interpreter (see cfa_program.hpp). run_cfa_program is one
// flat switch over the DWARF call-frame opcodes.
#include "guard/stack/cfa_program.hpp"

#if defined(__x86_64__) && defined(__linux__)

namespace mate::guard::unwind {

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

}  // namespace mate::guard::unwind

#endif  // x86-64 Linux
