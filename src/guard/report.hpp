// Reports and log lines, formatted without malloc or stdio: they are written from inside a
// malloc interposer and from the fault handler, where only async-signal-safe calls are allowed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mate/guard/allocator.hpp"
#include "guard/slot_table.hpp"

namespace mate::guard {

// A fixed buffer that is written to a file descriptor when full or flushed.
class ReportWriter {
 public:
  explicit ReportWriter(int fd) noexcept : fd_(fd) {}
  ~ReportWriter() { flush(); }
  ReportWriter& str(const char* s) noexcept;
  ReportWriter& dec(std::uint64_t v) noexcept;
  ReportWriter& sdec(std::int64_t v) noexcept;
  ReportWriter& hex(std::uint64_t v) noexcept;  // 0x...
  ReportWriter& byte(unsigned char b) noexcept;  // two hex digits
  ReportWriter& chr(char c) noexcept;
  void flush() noexcept;

 private:
  int fd_;
  std::size_t used_ = 0;
  char buffer_[512];
};

// "[0x..., 0x...)"
void write_range(ReportWriter& w, std::uintptr_t begin, std::size_t bytes) noexcept;
// "allocation #id of N bytes at [user, user+n) (tail mode, host, reservation [...])"
void write_allocation(ReportWriter& w, const Slot& s, const char* backend) noexcept;
// "<n> bytes from the start of " | "<n> bytes before the start of " | "<n> bytes past the end of "
// (the crash handler's report and write_place).
void write_offset(ReportWriter& w, const Description& d) noexcept;
// Where a described address lies: "<n> bytes from the start of | before the start of | past the
// end of <live|freed> allocation #id of N bytes at [user, user+n)" (invalid-free reports and
// write_description).
void write_place(ReportWriter& w, const Description& d) noexcept;
// One backtrace under "  <title> by thread <tid>[ (<thread_name>)]", symbolized (symbolize.hpp),
// else as backtrace_symbols_fd prints it. frames[0] is the faulting instruction when
// `first_is_exact` (an access stack), else a return address like the others. `fd` may be
// kReportOutput (report_output.hpp).
void write_frames(int fd, const char* title, void* const* frames, int count, pid_t tid, bool first_is_exact = false,
                  const char* thread_name = nullptr) noexcept;
// The same for a backtrace stored in `depot` (handle 0: none).
void write_stack(int fd, const char* title, const StackDepot& depot, std::uint32_t handle, pid_t tid) noexcept;

// What places a report in the program's run, after its backtraces: the MATE API call in flight
// on this thread (crash-context providers, mate/core/crash_context.hpp) and the pytest test
// running ("  pytest test: tests/test_x.py::test_y (call)", from PYTEST_CURRENT_TEST).
void write_program_context(int fd) noexcept;

// The mode to rerun with when the canary (deferred) side of `mode` caught something.
inline Mode other_mode(Mode m) noexcept { return m == Mode::Tail ? Mode::Head : Mode::Tail; }

}  // namespace mate::guard
