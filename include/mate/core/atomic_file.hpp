// mate/core/atomic_file.hpp — publish a file so that readers see the old or the new content,
// never half of it, even if this process dies or the disk fills up midway.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

namespace mate::core {

// Writes `content` to a temporary file beside `path` (same directory, so the rename is atomic),
// fsyncs it, sets `mode`, and renames it over `path`. On any failure the temporary file is
// removed, `path` is untouched, and the error says which step failed. Content that would take
// the file past RLIMIT_FSIZE fails at "write" with EFBIG (File too large) before anything is
// written, rather than raising SIGXFSZ.
std::error_code write_file_atomically(const std::string& path, std::string_view content,
                                      unsigned mode = 0644, std::string* failed_step = nullptr);

}  // namespace mate::core
