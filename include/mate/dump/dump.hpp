// mate/dump/dump.hpp — level-10 dumps: every instrumented API call's inputs and outputs on disk,
// so that `mate replay` can run the call again.
//
// Linking mate::dump (or mate::mate) is all it takes: the writer registers itself as a log call
// hook (mate/log/api.hpp) and works when MATE_LOGLEVEL=10. For each call that passes
// MATE_DUMP_INCLUDE / MATE_DUMP_EXCLUDE (fnmatch on the function name, include first):
//  * a directory MATE_DUMP_DIR/<YYYYmmdd_HHMMSS_mmm>_pid<PID>_call<SEQ>_<function> (mode 0700;
//    the root is created 0700, files are 0600): names never collide; call order is pid +
//    process_first_started (the process), then seq (find_call_dirs), not name order;
//  * call.json (atomically replaced) with status writing_inputs, then inputs_saved once the
//    input tensors are on disk, before the body runs (a crash keeps them); after the body,
//    the outputs are written and the status becomes completed, or raised with the exception;
//  * tensors in the default format (exact layout) or, with MATE_DUMP_SAFETENSORS=1, safetensors.
//    Each file is written as `.<name>.tmp.<pid>`, fsynced and renamed into place, and call.json
//    names it only after that (and after its directory is fsynced): whatever kills the process
//    or fills the disk, every file call.json names is complete. A leftover temporary is not part
//    of the dump.
// Per process, at most MATE_DUMP_MAX_COUNT calls and MATE_DUMP_MAX_SIZE_GB bytes are dumped. The
// size cap is never crossed: a call is only started when its inputs, plus as much again for its
// outputs, plus its call.json at its real size, fit under it; outputs (and long exception
// messages) that do not fit later are recorded as not saved (cut), and call.json is measured
// again before each replacement. When a cap stops dumping, one warning names the cap, its value and the
// variable. An I/O error (full disk, file-size limit) marks the call's directory failed (or
// removes it when even that cannot be written), warns once, and never disturbs the API call or
// earlier dumps. Nothing here throws into the instrumented call.
//
// The format is specified in docs/reference/dump-format.md; mate/dump/call_record.hpp reads it.
#pragma once

#include <cstdint>
#include <string>

namespace mate::dump {

// Re-reads the MATE_DUMP_* variables (honouring config::ScopedOverride) and resets the
// per-process counters, caps and one-time messages. For tests and tools.
void reconfigure();

// What this process has dumped so far.
struct Totals {
  std::uint64_t calls = 0;          // call directories created
  std::uint64_t bytes = 0;          // bytes written (tensor files and metadata)
  std::uint64_t skipped_count = 0;  // calls not dumped because of MATE_DUMP_MAX_COUNT
  std::uint64_t skipped_size = 0;   // calls not dumped because of MATE_DUMP_MAX_SIZE_GB
  std::uint64_t failed = 0;         // calls whose dump failed (I/O error)
};
Totals totals();

}  // namespace mate::dump
