// mate/core/file_size_limit.hpp — checking a write against RLIMIT_FSIZE before it is made.
//
// A write(2) (or fallocate on some file systems) that would take a regular file past the
// process's file-size limit (ulimit -f) raises SIGXFSZ, whose default action kills the whole
// process. The kernel sends it to the writing thread (send_sig); blocking it there only leaves it
// pending, to kill the process once unblocked, and taking it off (sigtimedwait) could swallow
// one the program's own write raised. MATE must never kill the host program and must not change
// its signal dispositions either, so its writers ask first and treat "would exceed" like a full
// disk: EFBIG ("File too large").
#pragma once

#include <cstdint>
#include <limits>

namespace mate::core {

inline constexpr std::uint64_t kNoFileSizeLimit = std::numeric_limits<std::uint64_t>::max();

// The process's current RLIMIT_FSIZE in bytes, kNoFileSizeLimit when unlimited (the common case).
// One getrlimit(2), read every time: the program may lower it at any moment. Async-signal-safe.
std::uint64_t file_size_limit() noexcept;

// True when writing up to offset `end` (one past the last byte written) would cross the limit.
bool exceeds_file_size_limit(std::uint64_t end) noexcept;

}  // namespace mate::core
