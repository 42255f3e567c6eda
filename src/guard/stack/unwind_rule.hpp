// A return address's frame rule (where its caller's frame and return address are), as the
// table unwinder caches it, and reading one from the module's unwind tables. x86-64 Linux.
#pragma once

#include <cstdint>

#if defined(__x86_64__) && defined(__linux__)

namespace mate::guard::unwind {

// Where the caller's frame is, for one return address: CFA = (rbp or rsp) + cfa_offset, the
// return address at CFA-8 (checked when read), rbp saved at CFA - rbp_saved_at (0: unchanged).
struct Rule {
  enum Kind : std::uint8_t { kFrame, kOutermost, kUnsupported } kind = kUnsupported;
  bool cfa_from_rbp = false;
  std::uint32_t cfa_offset = 0;
  std::uint32_t rbp_saved_at = 0;
  bool cacheable = true;  // false for an unsupported answer that may change (an I/O error)
};

// The rule for return address `pc`, read from its module's .eh_frame_hdr and .eh_frame (a cache
// miss). kUnsupported (cacheable or not) for anything the walk does not handle.
Rule read_rule(std::uintptr_t pc) noexcept;

}  // namespace mate::guard::unwind

#endif  // x86-64 Linux
