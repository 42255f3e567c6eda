// Async-signal-safe: the handler reads the slot tables without locks (a crashing thread may hold
// one), formats with ReportWriter and symbolizes with backtrace_symbols_fd.
#include "fault_handler.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "mate/core/crash_context.hpp"
#include "report.hpp"

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

// Slot copies leave out the state (an atomic); reports need it.
void copy_with_state(Slot* to, const Slot& from) noexcept {
  to->copy_allocation_from(from);
  to->state.store(from.state.load(std::memory_order_acquire), std::memory_order_relaxed);
}

void report(int sig, std::uintptr_t address, const StackDepot& depot, const Slot& s, bool outside,
            const char* backend, void* context) noexcept {
  const auto state = static_cast<State>(s.state.load(std::memory_order_acquire));
  const bool freed = state == State::Quarantined;
  const char* kind;
  if (outside) {
    kind = "wild access near an allocation";
  } else if (freed) {
    kind = "use-after-free";
  } else if (address < s.user) {
    kind = "underrun";
  } else {
    kind = "overflow";
  }
  {
    ReportWriter w(kStderr);
    w.str("mate guard: ").str(kind).str(": ").str(sig == SIGBUS ? "SIGBUS" : "SIGSEGV").str(" on ")
        .str(access_words(context)).hex(address).str(", ");
    if (address < s.user) {
      w.dec(s.user - address).str(" bytes before the start of ");
    } else if (address >= s.user + s.size) {
      w.dec(address - (s.user + s.size)).str(" bytes past the end of ");
    } else {
      w.dec(address - s.user).str(" bytes from the start of ");
    }
    if (freed) w.str("freed ");
    write_allocation(w, s, backend);
    if (outside) w.str(", outside its reservation");
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
  } else if (!outside) {
    w.str("mate guard: the ").str(to_string(s.mode)).str(" mode guard region caught the first invalid access ")
        .str(address < s.user ? "before the start" : "past the end").chr('\n');
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
  report(sig, address, *best_depot, best, best_outside, backend, context);
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

bool find_allocation(const SlotTable& table, std::size_t granularity, std::uintptr_t address, Slot* out,
                     bool* outside) noexcept {
  bool found = false;
  std::size_t nearest_distance = 0;
  const auto keep = [&](const Slot& s, bool beyond) noexcept {
    copy_with_state(out, s);
    *outside = beyond;
    found = true;
  };
  // True (stop) when `s` holds the address; otherwise remembers it if it is the nearest yet.
  const auto consider = [&](const Slot& s) noexcept {
    if (address >= s.reservation && address - s.reservation < s.reserved()) {
      keep(s, false);
      return true;
    }
    std::size_t distance = address < s.reservation ? s.reservation - address
                                                   : address - (s.reservation + s.reserved()) + 1;
    if (distance < nearest_distance) {
      nearest_distance = distance;
      keep(s, true);
    }
    return false;
  };
  // Starts over (a few times at most) when the quarantine's ring was replaced during the search.
  for (int attempt = 0; attempt < 4; ++attempt) {
    found = false;
    nearest_distance = granularity + 1;
    bool inside = false;
    const std::uint32_t hw = table.high_water();
    for (std::uint32_t i = 0; i < hw && !inside; ++i) {
      const Slot& s = table.slot(i);
      if (static_cast<State>(s.state.load(std::memory_order_acquire)) == State::None) continue;
      inside = consider(s);
    }
    if (inside) return true;
    // Slots first: a record is published before its slot is freed (SlotTable::quarantine_push).
    if (table.quarantine().scan(consider)) return found;
  }
  return found;
}

Description describe_in_table(const SlotTable& table, std::size_t granularity, std::uintptr_t address) noexcept {
  Description d;
  bool outside = false;
  Slot s;
  if (!find_allocation(table, granularity, address, &s, &outside)) return d;
  d.found = true;
  d.id = s.id();
  d.user = s.user;
  d.size = s.size;
  d.reservation = s.reservation;
  d.reserved = s.reserved();
  d.mapping = s.mapping();
  d.mapped = s.mapped();
  d.mode = s.mode;
  d.state = static_cast<State>(s.state.load(std::memory_order_acquire));
  d.outside = outside;
  if (address < s.user) {
    d.relation = Relation::BeforeStart;
    d.offset = s.user - address;
  } else if (address >= s.user + s.size) {
    d.relation = Relation::PastEnd;
    d.offset = address - (s.user + s.size);
  } else {
    d.relation = Relation::Inside;
    d.offset = address - s.user;
  }
  return d;
}

}  // namespace mate::guard
