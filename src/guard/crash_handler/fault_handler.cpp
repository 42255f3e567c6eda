// The crash handler: SIGSEGV/SIGBUS in a guard region or a quarantined range becomes one report
// (the access stack, then where the allocation was made and freed), then the program's own
// handler runs, and the process dies of the original signal if that handler returns. Faults
// elsewhere, and the signals a process sends, go to the program's handler untouched.
// Installed by install_fault_handler() (install_guard_allocator() calls it), never by a
// GuardAllocator's constructor.
//
// The program's handler is the one installed before the guard's, or under `mate guard-run` the
// one the program installs at any time since: the preload keeps it aside instead of letting it
// replace the guard's (program_signal_actions.hpp, preload/preload_signals.cpp).
//
// Async-signal-safe: the handler reads the slot tables without locks (a crashing thread may hold
// one, guard/lookup.hpp), formats with ReportWriter, walks the stack without allocating
// (stack_capture.hpp) and symbolizes with a child process (stack/symbolize.hpp).

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "guard/crash_handler/program_signal_actions.hpp"
#include "guard/lookup.hpp"
#include "guard/report.hpp"
#include "guard/report_output.hpp"
#include "guard/stack/stack_capture.hpp"
#include "mate/core/signal_chaining.hpp"
#include "mate/guard/allocator.hpp"

namespace mate::guard {

namespace {

constinit std::atomic<bool> g_installed{false};

using core::is_a_function;
using core::sent_by_a_process;

// The default disposition, for real (core::restore_default_action, through the C library's
// sigaction under the preload's interposer).
void die_by_default(int sig) noexcept { core::restore_default_action(sig, system_sigaction); }

// Runs the program's handler as the kernel would have, its one-shot reset (SA_RESETHAND) done
// first on the program's action the guard keeps.
void run_program_handler(int sig, const struct sigaction& action, siginfo_t* info, void* context) noexcept {
  if ((action.sa_flags & SA_RESETHAND) != 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    exchange_program_action(sig, &dfl, nullptr);
  }
  core::run_as_the_kernel_would(sig, action, info, context);
}

const char* access_words(void* context) noexcept {
#if defined(__x86_64__)
  auto* uc = static_cast<ucontext_t*>(context);
  // Page-fault error code bit 1: the access was a write.
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? "a write to " : "a read of ";
#else
  (void)context;
  return "an access to ";
#endif
}

void report(int sig, std::uintptr_t address, const StackDepot& depot, const Slot& s, const Description& d, const char* backend,
            void* context) noexcept {
  const bool freed = d.state == State::Quarantined;
  const char* kind;
  if (d.outside) {
    kind = "wild access near an allocation";
  } else if (freed) {
    kind = "use-after-free";
  } else if (d.relation == Relation::BeforeStart) {
    kind = "underrun";
  } else {
    kind = "overflow";
  }
  {
    ReportWriter w(kReportOutput);
    w.str("mate guard: ").str(kind).str(": ").str(sig == SIGBUS ? "SIGBUS" : "SIGSEGV").str(" on ")
        .str(access_words(context)).hex(address).str(", ");
    write_offset(w, d);
    if (freed) w.str("freed ");
    write_allocation(w, s, backend);
    if (d.outside) w.str(", outside its reservation");
    w.chr('\n');
  }
  // The access: the faulting thread's stack from the registers the kernel saved, frame #0 the
  // faulting instruction (as GWP-ASan and AddressSanitizer print it).
  void* frames[kMaxFrames];
  const int count = capture_signal_stack(context, frames, kMaxFrames);
  // prctl is a plain system call, so the name is safe to read here.
  char name[17] = {};
  if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0) name[0] = '\0';
  write_frames(kReportOutput, "accessed", frames, count, gettid(), /*first_is_exact=*/true, name);
  write_stack(kReportOutput, "allocated", depot, s.alloc_stack, s.alloc_tid);
  if (freed) write_stack(kReportOutput, "freed", depot, s.free_stack, s.free_tid);
  write_program_context(kReportOutput);
  ReportWriter w(kReportOutput);
  if (freed) {
    w.str("mate guard: the freed range stays inaccessible while it is quarantined; the access above used a "
          "stale pointer\n");
  } else if (!d.outside) {
    w.str("mate guard: the ").str(to_string(d.mode)).str(" mode guard region caught the first invalid access ")
        .str(d.relation == Relation::BeforeStart ? "before the start" : "past the end").chr('\n');
  }
}

// The report runs on a stack of its own: the handler may be on a small alternate signal stack
// (8 KiB is common: Rust sets one up on every thread), and the stack walk, the symbol-table reads
// and the symbolizer's child need more. 64 KiB of untouched .bss until a report; one report at a
// time (a second thread reporting at once stays on its own stack).
struct ReportArguments {
  int sig;
  std::uintptr_t address;
  const StackDepot* depot;
  const Slot* slot;
  Description description;
  const char* backend;
  void* context;
};

void report_with(void* arg) {
  const auto* a = static_cast<const ReportArguments*>(arg);
  report(a->sig, a->address, *a->depot, *a->slot, a->description, a->backend, a->context);
}

#if defined(__x86_64__) && defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
constexpr std::size_t kReportStackBytes = 64 * 1024;
alignas(64) unsigned char g_report_stack[kReportStackBytes];
constinit std::atomic<bool> g_report_stack_busy{false};

extern "C" void mate_guard_call_on_stack(void (*fn)(void*), void* arg, void* stack_top);
// fn(arg) with the stack pointer at stack_top (16-byte aligned). The frame keeps the caller's
// stack pointer in rbp, and its CFI says so, so that unwinding (the C++ unwinder's walk through
// the handler to the signal frame) crosses back to the original stack.
asm(R"(
  .text
  .p2align 4
  .type mate_guard_call_on_stack, @function
  .hidden mate_guard_call_on_stack
mate_guard_call_on_stack:
  .cfi_startproc
  push %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  mov %rsp, %rbp
  .cfi_def_cfa_register %rbp
  mov %rdx, %rsp
  mov %rdi, %rax
  mov %rsi, %rdi
  call *%rax
  mov %rbp, %rsp
  pop %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size mate_guard_call_on_stack, .-mate_guard_call_on_stack
)");

void report_on_own_stack(ReportArguments* a) noexcept {
  if (g_report_stack_busy.exchange(true, std::memory_order_acquire)) {
    report_with(a);
    return;
  }
  mate_guard_call_on_stack(report_with, a, g_report_stack + kReportStackBytes);
  g_report_stack_busy.store(false, std::memory_order_release);
}
#else
// Sanitizers track the stack they run on (a switch needs their fiber calls): the handler's own.
void report_on_own_stack(ReportArguments* a) noexcept { report_with(a); }
#endif

// What the signal would have done without the guard: the program's handler, nothing (ignored),
// or the default action, re-raised (it is blocked until this handler returns, then delivered).
void pass_on_sent_signal(int sig, siginfo_t* info, void* context) noexcept {
  const struct sigaction program = program_action(sig);
  if (program.sa_handler == SIG_IGN) return;
  if (is_a_function(program)) {
    run_program_handler(sig, program, info, context);
    return;
  }
  die_by_default(sig);
  raise(sig);
}

bool mapped_by_someone_else(std::uintptr_t address) noexcept {
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0) return false;
  unsigned char resident = 0;
  void* start = reinterpret_cast<void*>(address & ~(static_cast<std::uintptr_t>(page) - 1));
  return ::mincore(start, static_cast<std::size_t>(page), &resident) == 0;
}

void on_fault(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (sent_by_a_process(info)) {
    pass_on_sent_signal(sig, info, context);
    errno = saved_errno;
    return;
  }
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  Registered regs[kMaxAllocators];
  int n = registered_allocators(regs, kMaxAllocators);
  Slot best;
  bool have_best = false;
  const StackDepot* best_depot = nullptr;
  bool best_outside = true;
  const char* backend = "";
  for (int i = 0; i < n; ++i) {
    bool outside = false;
    Slot found;
    if (!find_allocation(*regs[i].table, regs[i].allocator->backend().granularity(), address, &found, &outside))
      continue;
    if (!have_best || (best_outside && !outside)) {
      copy_with_state(&best, found);
      have_best = true;
      best_depot = &regs[i].table->depot;
      best_outside = outside;
      backend = regs[i].allocator->backend().name();
    }
  }
  // Near a reservation but outside it, on a page something else has mapped (the program's own
  // PROT_NONE page the kernel placed next to the guard's): that mapping's owner faulted, not a
  // wild access into unmapped space, so it is the program's (mincore fails only where nothing is
  // mapped; a system call, async-signal-safe).
  if (have_best && best_outside && mapped_by_someone_else(address)) have_best = false;
  if (have_best) {
    ReportArguments a{sig, address, best_depot, &best, describe_slot(best, address, best_outside), backend, context};
    report_on_own_stack(&a);
  }
  // A fault outside every guarded range is the program's own (a runtime may fault on purpose):
  // its handler gets it untouched. After a report the program's handler runs too (Python's
  // faulthandler prints its traceback); either way, if it returns, or there is none, the
  // access is re-executed under the default action for a fault in a guarded range, or under
  // the program's for its own (its handler may have made the access valid).
  const struct sigaction program = program_action(sig);
  if (is_a_function(program)) {
    run_program_handler(sig, program, info, context);
    if (have_best) die_by_default(sig);
  } else {
    die_by_default(sig);
  }
  errno = saved_errno;
}

}  // namespace

void install_fault_handler() noexcept {
  if (g_installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS}) {
    struct sigaction previous {};
    system_sigaction(sig, &sa, &previous);
    set_initial_program_action(sig, previous);
  }
}

}  // namespace mate::guard
