// ReportWriter and the pieces of every report: ranges, allocations, places, backtraces (see
// report.hpp).
#include "guard/report.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <cstring>

#include "mate/core/signal_safe_format.hpp"
#include "guard/stack/symbolize.hpp"

namespace mate::guard {

ReportWriter& ReportWriter::str(const char* s) noexcept {
  while (*s != '\0') chr(*s++);
  return *this;
}

ReportWriter& ReportWriter::chr(char c) noexcept {
  if (used_ == sizeof buffer_) flush();
  buffer_[used_++] = c;
  return *this;
}

ReportWriter& ReportWriter::dec(std::uint64_t v) noexcept { return str(core::decimal_text(v).c_str()); }

ReportWriter& ReportWriter::sdec(std::int64_t v) noexcept { return str(core::signed_decimal_text(v).c_str()); }

ReportWriter& ReportWriter::hex(std::uint64_t v) noexcept { return str("0x").str(core::hex_text(v).c_str()); }

ReportWriter& ReportWriter::byte(unsigned char b) noexcept {
  chr("0123456789abcdef"[b >> 4]);
  return chr("0123456789abcdef"[b & 15]);
}

void ReportWriter::flush() noexcept {
  std::size_t done = 0;
  while (done < used_) {
    ssize_t n = ::write(fd_, buffer_ + done, used_ - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  used_ = 0;
}

void write_range(ReportWriter& w, std::uintptr_t begin, std::size_t bytes) noexcept {
  w.chr('[').hex(begin).str(", ").hex(begin + bytes).chr(')');
}

void write_allocation(ReportWriter& w, const Slot& s, const char* backend) noexcept {
  w.str("allocation #").dec(s.id()).str(" of ").dec(s.size).str(" bytes at ");
  write_range(w, s.user, s.size);
  w.str(" (").str(to_string(s.mode)).str(" mode, ").str(backend).str(" memory, mapped ");
  if (s.mapped() == 0) {
    w.str("nothing");
  } else {
    write_range(w, s.mapping(), s.mapped());
  }
  w.str(", reserved ");
  write_range(w, s.reservation, s.reserved());
  w.chr(')');
}

void write_offset(ReportWriter& w, const Description& d) noexcept {
  if (d.relation == Relation::Inside) {
    w.dec(d.offset).str(" bytes from the start of ");
  } else if (d.relation == Relation::BeforeStart) {
    w.dec(d.offset).str(" bytes before the start of ");
  } else {
    w.dec(d.offset).str(" bytes past the end of ");
  }
}

void write_place(ReportWriter& w, const Description& d) noexcept {
  write_offset(w, d);
  w.str(d.state == State::Quarantined ? "freed" : "live").str(" allocation #").dec(d.id).str(" of ").dec(d.size)
      .str(" bytes at ");
  write_range(w, d.user, d.size);
}

void write_frames(int fd, const char* title, void* const* frames, int count, pid_t tid) noexcept {
  {
    ReportWriter w(fd);
    w.str("  ").str(title).str(" by thread ").dec(static_cast<std::uint64_t>(tid));
    if (count == 0) w.str(": no backtrace (backtraces are off, or the depot of distinct stacks is full)");
    w.chr('\n');
  }
  // Function, file and line when addr2line can say; else backtrace_symbols_fd's
  // "module(function+offset) [address]" lines (dynamic symbols only), written without malloc.
  if (count > 0 && !write_symbolized_frames(fd, frames, count)) backtrace_symbols_fd(frames, count, fd);
}

void write_stack(int fd, const char* title, const StackDepot& depot, std::uint32_t handle, pid_t tid) noexcept {
  void* frames[kMaxFrames];
  write_frames(fd, title, frames, depot.get(handle, frames), tid);
}

}  // namespace mate::guard
