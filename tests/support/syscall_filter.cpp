#include "syscall_filter.hpp"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <cstddef>

namespace mate::testing {

bool trap_system_calls(std::initializer_list<long> numbers) {
#if defined(__x86_64__)
  // On the stack, not the heap: freeing a vector after the filter is in force would be a system
  // call of the allocator's (the guard's records the stack of a free, with gettid).
  constexpr std::size_t kMax = 64;
  if (numbers.size() > (kMax - 5) / 2) return false;
  sock_filter program[kMax];
  std::size_t n = 0;
  program[n++] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  program[n++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
  program[n++] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  program[n++] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
  for (long nr : numbers) {
    program[n++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(nr), 0, 1);
    program[n++] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  }
  program[n++] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  const sock_fprog fprog{static_cast<unsigned short>(n), program};
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // the SIGSYS kill is the expected failure, not a crash to keep
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) == 0;
#else
  (void)numbers;
  return false;
#endif
}

bool allow_only_write_and_exit() {
#if defined(__x86_64__)
  return trap_system_calls({SYS_fstat, SYS_newfstatat, SYS_statx, SYS_getrlimit, SYS_prlimit64, SYS_lseek, SYS_fcntl,
                            SYS_fallocate, SYS_ftruncate, SYS_getpid, SYS_gettid, SYS_rt_sigprocmask});
#else
  return false;
#endif
}

}  // namespace mate::testing
