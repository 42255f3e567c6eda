// The SIGSEGV/SIGBUS handler behind read_host_guarded (see host_read_guard.hpp).
#include "host_read_guard.hpp"

#include <setjmp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace mate::tensor::detail {

namespace {

struct GuardedRead {
  sigjmp_buf resume;
  std::uintptr_t lo, hi;  // page-rounded
  std::uintptr_t fault;
};

// Initial-exec: the handler reads it on any thread, and a dynamically allocated TLS block
// (a dlopen'ed library's default) could be allocated inside a signal handler.
__attribute__((tls_model("initial-exec"))) thread_local GuardedRead* t_read = nullptr;

struct sigaction g_previous[2];  // SIGSEGV's and SIGBUS's actions before ours
std::once_flag g_install;
std::atomic<bool> g_installed{false};  // a load, where call_once is a call through the PLT
std::uintptr_t g_page = 4096;           // set by install()

int index_of(int sig) noexcept { return sig == SIGBUS ? 1 : 0; }

// As if this handler had never been installed: the previous handler runs, or the default
// action ends the process with the same signal and address (returning from a fault re-executes
// the access; a signal sent by kill() is raised again).
void chain(int sig, siginfo_t* info, void* context) noexcept {
  const struct sigaction& previous = g_previous[index_of(sig)];
  if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
    if (info->si_code <= 0) ::raise(sig);
    return;
  }
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    previous.sa_sigaction(sig, info, context);
  } else {
    previous.sa_handler(sig);
  }
}

void on_fault(int sig, siginfo_t* info, void* context) {
  GuardedRead* read = t_read;
  if (read != nullptr && info->si_code > 0) {  // a fault, not a signal sent by a process
    const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
    if (at >= read->lo && at < read->hi) {
      read->fault = at;
      siglongjmp(read->resume, 1);
    }
  }
  chain(sig, info, context);
}

void install() noexcept {
  g_page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (int sig : {SIGSEGV, SIGBUS}) {
    struct sigaction ours {};
    ours.sa_sigaction = on_fault;
    ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;  // NODEFER: siglongjmp leaves no mask to undo
    sigemptyset(&ours.sa_mask);
    ::sigaction(sig, &ours, &g_previous[index_of(sig)]);
  }
  g_installed.store(true, std::memory_order_release);
}

}  // namespace

bool read_host_guarded(std::uintptr_t lo, std::uintptr_t hi, void (*read)(void*), void* context,
                       std::uintptr_t& fault) noexcept {
  if (!g_installed.load(std::memory_order_acquire)) std::call_once(g_install, install);
  const std::uintptr_t page = g_page;
  GuardedRead guarded;
  guarded.lo = lo & ~(page - 1);
  guarded.hi = hi > UINTPTR_MAX - page ? UINTPTR_MAX : (hi + page - 1) & ~(page - 1);
  guarded.fault = 0;
  GuardedRead* const outer = t_read;
  // No signal mask saved (0): the handler runs with SA_NODEFER, so leaving it changes no mask.
  if (sigsetjmp(guarded.resume, 0) != 0) {
    t_read = outer;
    fault = static_cast<volatile GuardedRead&>(guarded).fault;
    return false;
  }
  t_read = &guarded;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  read(context);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_read = outer;
  return true;
}

bool host_range_readable(std::uintptr_t lo, std::uintptr_t hi, std::uintptr_t& fault) noexcept {
  if (hi <= lo) return true;
  struct Range {
    std::uintptr_t lo, hi, page;
  } range{lo, hi, static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE))};
  auto touch = [](void* context) {
    const Range& r = *static_cast<const Range*>(context);
    for (std::uintptr_t p = r.lo; p < r.hi; p = (p | (r.page - 1)) + 1) {
      (void)*reinterpret_cast<const volatile unsigned char*>(p);
      if (p > UINTPTR_MAX - r.page) break;
    }
  };
  return read_host_guarded(lo, hi, touch, &range, fault);
}

}  // namespace mate::tensor::detail
