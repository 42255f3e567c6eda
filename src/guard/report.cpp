// ReportWriter and the pieces of every report: ranges, allocations, places, backtraces (see
// report.hpp).
#include "guard/report.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mate/config.hpp"
#include "mate/core/crash_context.hpp"
#include "mate/core/signal_safe_format.hpp"
#include "guard/report_output.hpp"
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

namespace {

// Every real descriptor behind `fd` (report_output.hpp) gets all the bytes.
void write_all(int fd, const char* bytes, std::size_t size) noexcept {
  const int saved_errno = errno;  // a log line from malloc must not change what the program sees
  int fds[2];
  const int count = report_fds(fd, fds);
  for (int i = 0; i < count; ++i) {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fds[i], bytes + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
  }
  errno = saved_errno;
}

}  // namespace

void ReportWriter::flush() noexcept {
  write_all(fd_, buffer_, used_);
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

void write_frames(int fd, const char* title, void* const* frames, int count, pid_t tid, bool first_is_exact,
                  const char* thread_name) noexcept {
  {
    ReportWriter w(fd);
    w.str("  ").str(title).str(" by thread ").dec(static_cast<std::uint64_t>(tid));
    if (thread_name != nullptr && thread_name[0] != '\0') w.str(" (").str(thread_name).chr(')');
    if (count == 0) w.str(": no backtrace (backtraces are off, or the depot of distinct stacks is full)");
    w.chr('\n');
  }
  // Function, file and line when addr2line can say; else backtrace_symbols_fd's
  // "module(function+offset) [address]" lines (dynamic symbols only), written without malloc.
  if (count > 0 && !write_symbolized_frames(fd, frames, count, first_is_exact)) {
    int fds[2];
    const int n = report_fds(fd, fds);
    for (int i = 0; i < n; ++i) backtrace_symbols_fd(frames, count, fds[i]);
  }
}

void write_program_context(int fd) noexcept {
  int fds[2];
  const int n = report_fds(fd, fds);
  for (int i = 0; i < n; ++i) core::write_crash_context(fds[i]);
  // pytest keeps the test running in the process's environment (Python's os module sets the C
  // library's too); read with the registry's signal-safe reader.
  const char* test = config::raw_env_in_signal_handler(config::Var::PYTEST_CURRENT_TEST);
  if (test != nullptr && test[0] != '\0') {
    ReportWriter w(fd);
    w.str("  pytest test: ");
    for (int i = 0; test[i] != '\0' && i < 1024; ++i) w.chr(test[i]);
    w.chr('\n');
  }
}

void write_stack(int fd, const char* title, const StackDepot& depot, std::uint32_t handle, pid_t tid) noexcept {
  void* frames[kMaxFrames];
  write_frames(fd, title, frames, depot.get(handle, frames), tid);
}

}  // namespace mate::guard
