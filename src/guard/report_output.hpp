// Where the guard's words go: the stderr the program had when it started, and a copy in the
// report file (`mate guard-run --report-file`, MATE_GUARD_REPORT_FILE).
//
// A program may point fd 2 elsewhere once it runs (pytest's capture redirects it to a temporary
// file and throws it away when the process dies), so the preload duplicates fd 2 at start-up to a
// high descriptor, close-on-exec, and the guard writes there. Before each write the descriptor is
// checked to still be that file (device and inode): a program that closed it and got the number
// back for a file of its own must not find a report in it; the guard then writes to fd 2.
//
// Async-signal-safe (fcntl, fstat, open, write): used by the fault handler and by the malloc
// interposer's reports.
#pragma once

namespace mate::guard {

// Passed where a report writer takes a file descriptor: every destination of the guard's output
// (report_fds).
inline constexpr int kReportOutput = -2;

// Duplicates fd 2 for the guard's output (the preload's start-up; once). Without it the guard
// writes to fd 2 as it is at the time; when fd 2 is closed at start-up the guard writes no
// stderr copy at all (the number may be a file of the program's later).
void keep_program_stderr() noexcept;

// The report file's path, with "%i" replaced by the process ID when written (a forked child gets
// its own file); nullptr or "" for none. The file is opened (created 0600, appended to) at the
// guard's first output in each process. A path longer than PATH_MAX is refused (false).
bool set_report_file(const char* pattern) noexcept;

// The real descriptors behind `fd`: kReportOutput gives the program's stderr (as above) and the
// report file when there is one (count returned, at most 2); any other value is itself.
int report_fds(int fd, int out[2]) noexcept;

}  // namespace mate::guard
