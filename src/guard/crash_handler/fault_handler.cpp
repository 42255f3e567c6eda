// The crash handler: SIGSEGV/SIGBUS in a guard region or a quarantined range becomes one report,
// then the process dies of the original signal; faults elsewhere go to the previous handler.
// Installed by install_fault_handler() (install_guard_allocator() calls it), never by a
// GuardAllocator's constructor.
//
// Async-signal-safe: the handler reads the slot tables without locks (a crashing thread may hold
// one, guard/lookup.hpp), formats with ReportWriter and symbolizes with backtrace_symbols_fd.

#include <signal.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "guard/lookup.hpp"
#include "guard/report.hpp"
#include "mate/core/crash_context.hpp"
#include "mate/guard/allocator.hpp"

namespace mate::guard {

namespace {

constexpr int kStderr = 2;
struct sigaction g_previous_segv;
struct sigaction g_previous_bus;
std::atomic<bool> g_installed{false};

struct sigaction* previous_for(int sig) noexcept { return sig == SIGBUS ? &g_previous_bus : &g_previous_segv; }

// Puts the previous disposition back, so that returning re-executes the access and the fault
// ends the process (or reaches the previous handler) with its original signal and address.
void restore_previous(int sig) noexcept {
  struct sigaction* prev = previous_for(sig);
  if (prev->sa_handler == SIG_IGN) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, nullptr);
    return;
  }
  sigaction(sig, prev, nullptr);
}

// SIG_DFL and SIG_IGN are values of the handler field whatever the flags say (the kernel reads
// them so even with SA_SIGINFO): never called.
bool is_a_function(const struct sigaction* a) noexcept {
  return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

bool ignored(const struct sigaction* a) noexcept { return a->sa_handler == SIG_IGN; }

void chain(int sig, siginfo_t* info, void* context) noexcept {
  struct sigaction* prev = previous_for(sig);
  if (is_a_function(prev)) {
    if (prev->sa_flags & SA_SIGINFO) prev->sa_sigaction(sig, info, context);
    else prev->sa_handler(sig);
    return;
  }
  restore_previous(sig);
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
    ReportWriter w(kStderr);
    w.str("mate guard: ").str(kind).str(": ").str(sig == SIGBUS ? "SIGBUS" : "SIGSEGV").str(" on ")
        .str(access_words(context)).hex(address).str(", ");
    write_offset(w, d);
    if (freed) w.str("freed ");
    write_allocation(w, s, backend);
    if (d.outside) w.str(", outside its reservation");
    w.str("\n  thread ").dec(static_cast<std::uint64_t>(gettid()));
    // prctl is a plain system call, so the name is safe to read here.
    char name[17] = {};
    if (prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && name[0] != '\0') w.str(" (").str(name).chr(')');
    w.chr('\n');
  }
  write_stack(kStderr, "allocated", depot, s.alloc_stack, s.alloc_tid);
  if (freed) write_stack(kStderr, "freed", depot, s.free_stack, s.free_tid);
  core::write_crash_context(kStderr);
  ReportWriter w(kStderr);
  if (freed) {
    w.str("mate guard: the freed range stays inaccessible while it is quarantined; the access above used a "
          "stale pointer\n");
  } else if (!d.outside) {
    w.str("mate guard: the ").str(to_string(d.mode)).str(" mode guard region caught the first invalid access ")
        .str(d.relation == Relation::BeforeStart ? "before the start" : "past the end").chr('\n');
  }
}

// A SIGSEGV/SIGBUS sent with kill, raise, tgkill or sigqueue rather than raised by an access:
// si_addr means nothing then, and returning re-executes no faulting instruction.
bool sent_by_a_process(const siginfo_t* info) noexcept { return info->si_code <= 0; }

// What the signal would have done without the guard: the previous handler, nothing (ignored),
// or the default action, re-raised (it is blocked until this handler returns, then delivered).
void pass_on_sent_signal(int sig, siginfo_t* info, void* context) noexcept {
  struct sigaction* prev = previous_for(sig);
  if (ignored(prev)) return;
  if (is_a_function(prev)) {
    chain(sig, info, context);
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
  raise(sig);
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
  if (!have_best) {
    errno = saved_errno;
    chain(sig, info, context);
    return;
  }
  report(sig, address, *best_depot, best, describe_slot(best, address, best_outside), backend, context);
  restore_previous(sig);
  errno = saved_errno;
}

}  // namespace

void install_fault_handler() noexcept {
  if (g_installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_previous_segv);
  sigaction(SIGBUS, &sa, &g_previous_bus);
}

}  // namespace mate::guard
