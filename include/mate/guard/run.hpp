// mate/guard/run.hpp — running a program with the guarded allocator preloaded (`mate guard-run`).
//
// The child gets LD_PRELOAD=libmate_guard_preload.so (prepended to any existing LD_PRELOAD), the
// internal bootstrap variables MATE_GUARD_ALLOCATOR_AUTO_INSTALL/_MODE/_SYNC_ON_FREE/
// _LOG_ALLOCATIONS (and _ALIGN, _SUMMARY, _OUTCOME_FD when asked for), MATE_GUARD_BACKTRACES=0
// when backtraces are off, and each vendor's caching-allocator switch (PYTORCH_NO_CUDA_MEMORY_CACHING=1,
// PYTORCH_NO_MUSA_MEMORY_CACHING=1) unless already set (a caching allocator would hide per-tensor
// boundaries). SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the parent are
// passed to the child.
#pragma once

#include <string>
#include <vector>

#include "mate/guard/allocator.hpp"

namespace mate::guard {

struct GuardRunOptions {
  Mode mode = Mode::Tail;
  bool sync_on_free = true;
  bool log_allocations = false;
  bool backtraces = true;  // false: MATE_GUARD_BACKTRACES=0 in the child
  // --align: the alignment of malloc/calloc/realloc blocks (0: max_align_t's, the default).
  std::size_t align = 0;
  bool summary = false;  // --summary: the guarded / not guarded counts at exit
  int outcome_fd = -1;   // where the child writes canary findings (--mode auto)
  // --report-file: an absolute path ("%i" = the process ID) given to the child as
  // MATE_GUARD_REPORT_FILE, replacing one set in the environment; empty: the environment's.
  std::string report_file;
};

// `mate guard-run --mode auto`: runs in tail mode; when that run ends with a canary found
// corrupted before the start instead of a fault at the access, runs the same command again in
// head mode and prints one verdict; a canary past the end (the alignment padding, where no mode
// faults) gets a verdict without a rerun. A run that ends cleanly, or without a canary finding,
// is not run again. Returns the exit status of the run that showed the bug.
int run_guarded_auto(const std::vector<std::string>& argv, const GuardRunOptions& options);

// The preload library next to this program (build tree or installed tree). Throws GuardError
// naming the places looked in when it is missing.
std::string preload_library_path();

// The environment run_guarded() gives its child: `base` (a null-terminated array of "NAME=value",
// e.g. environ) without MATE_GUARD_ALLOCATOR_* and with the additions listed at the top of this
// file, `preload` first in LD_PRELOAD. Also used by programs that re-execute themselves guarded
// (the test suite's --guard-alloc).
std::vector<std::string> guarded_environment(char** base, const std::string& preload, const GuardRunOptions& options);

// Runs argv[0] (searched on PATH) with the allocator preloaded and waits for it. Returns the
// child's exit status, 128+N when signal N ended it, 127 when it could not be started (with a
// message on stderr).
int run_guarded(const std::vector<std::string>& argv, const GuardRunOptions& options);

}  // namespace mate::guard
