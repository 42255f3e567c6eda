// syscall_filter.hpp — proving in a test that code makes no system call of a given kind.
//
// trap_system_calls installs a seccomp filter on the calling thread (inherited by its children,
// kept for the rest of the process's life) under which any of `numbers` kills the process with
// SIGSYS. Use it in a forked child only. Returns false where seccomp filters cannot be installed
// (an architecture other than x86-64, a kernel or container without them): skip the test then.
#pragma once

#include <initializer_list>

namespace mate::testing {

bool trap_system_calls(std::initializer_list<long> numbers);

// The system calls the log sink made around each record before it kept them off the record's
// path: fstat/newfstatat/statx, getrlimit/prlimit64, lseek, fcntl, fallocate, ftruncate, getpid,
// gettid and the signal mask. With these trapped, a record can only be its write(2).
bool allow_only_write_and_exit();

}  // namespace mate::testing
