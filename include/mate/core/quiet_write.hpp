// mate/core/quiet_write.hpp — MATE's own writes to streams that may be pipes, without SIGPIPE,
// and the directories MATE creates, with explicit modes.
//
// A write(2) to a pipe or FIFO whose reader has gone raises SIGPIPE, whose default action kills
// the whole program: the host program never asked for that from MATE's logging. These writes
// turn it into the error EPIPE, without changing the program's signal dispositions:
//  * on a socket: send(MSG_NOSIGNAL) (no extra system call);
//  * on a pipe or FIFO (or a descriptor of unknown kind): SIGPIPE is blocked in the calling
//    thread around the write, and a SIGPIPE the write raised is consumed (sigtimedwait) before
//    the mask is restored. A SIGPIPE that was already pending (the program blocks it itself) is
//    left pending. Costs two rt_sigprocmask calls per write, only on pipes;
//  * on a regular file, a terminal or another device: a plain write (none of them raises
//    SIGPIPE).
// So a program that ignores SIGPIPE, handles it, or blocks it keeps exactly that for its own
// writes; MATE's write only ever sees EPIPE. All functions are async-signal-safe and never throw.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace mate::core {

// How a descriptor can fail: decided once (fstat) for a destination, then reused per write.
enum class StreamKind : unsigned char {
  Plain,   // regular file, terminal, /dev/null, other devices: a plain write
  Socket,  // send(MSG_NOSIGNAL)
  Pipe,    // pipe, FIFO or unknown: SIGPIPE blocked around the write
};
StreamKind stream_kind(int fd) noexcept;

// Writes all of `data` (continuing partial writes, retrying EINTR). Returns 0 or the errno
// (EPIPE when the reader has gone), never raising SIGPIPE.
int write_all(int fd, const void* data, std::size_t size, StreamKind kind) noexcept;

// write_all to stderr (kind Pipe: stderr may be anything). For MATE's warnings.
void write_stderr(std::string_view text) noexcept;

// Creates `dir` and its missing parents, each with `mode` (mkdir's mode, which the umask can
// only narrow: under `umask 000` they are still `mode`). Existing directories are left as they
// are. Returns 0 or the errno of the step that failed (ENOTDIR when a component is a file).
int create_directories(const std::string& dir, mode_t mode) noexcept;

}  // namespace mate::core
