// The SIGSEGV/SIGBUS handler behind read_host_guarded (see host_read_guard.hpp).
#include "host_read_guard.hpp"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "mate/core/crash_context.hpp"
#include "mate/core/signal_chaining.hpp"

namespace mate::tensor::detail {

namespace {

struct GuardedRead {
  sigjmp_buf resume;
  std::uintptr_t start;   // the range as asked, for the report of a fault with no address
  std::uintptr_t lo, hi;  // page-rounded
  std::uintptr_t fault;
};

// Initial-exec: the handler reads it on any thread, and a dynamically allocated TLS block
// (a dlopen'ed library's default) could be allocated inside a signal handler.
__attribute__((tls_model("initial-exec"))) thread_local GuardedRead* t_read = nullptr;

struct sigaction g_previous[2];  // SIGSEGV's and SIGBUS's actions before ours
std::once_flag g_install;
std::atomic<bool> g_decided{false};  // a load, where call_once is a call through the PLT
bool g_active = false;               // our handler is installed (see install())
std::uintptr_t g_page = 4096;

int index_of(int sig) noexcept { return sig == SIGBUS ? 1 : 0; }

// As if this handler had never been installed. Ignored or default: a fault cannot be ignored
// (the kernel ends a process that ignores the signal of a fault), so the default action is put
// back and the access re-executed when this returns; a signal sent by a process is ignored, or
// raised again under the default action. A handler: run as the kernel would have run it, its
// one-shot reset (SA_RESETHAND) done first on the action kept here.
void pass_on(int sig, siginfo_t* info, void* context) noexcept {
  const int saved_errno = errno;
  struct sigaction& previous = g_previous[index_of(sig)];
  const bool sent = core::sent_by_a_process(info);
  if (!core::is_a_function(previous)) {
    const bool ignored = previous.sa_handler == SIG_IGN;
    if (!(ignored && sent)) core::restore_default_action(sig);
    if (sent && !ignored) ::raise(sig);
    errno = saved_errno;
    return;
  }
  const struct sigaction action = previous;
  if ((action.sa_flags & SA_RESETHAND) != 0) {
    previous.sa_handler = SIG_DFL;
    previous.sa_flags &= ~SA_SIGINFO;
  }
  core::run_as_the_kernel_would(sig, action, info, context);
  errno = saved_errno;
}

void on_fault(int sig, siginfo_t* info, void* context) {
  GuardedRead* read = t_read;
  if (read != nullptr && info->si_code > 0) {  // a fault, not a signal sent by a process
    const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
    // A non-canonical address (a wild pointer with garbage in its high bits) is a general
    // protection fault: SIGSEGV with SI_KERNEL and no address.
    const bool no_address = sig == SIGSEGV && info->si_code == SI_KERNEL;
    if (no_address || (at >= read->lo && at < read->hi)) {
      read->fault = no_address ? read->start : at;
      siglongjmp(read->resume, 1);
    }
  }
  pass_on(sig, info, context);
}

// Once per process. Under `mate guard-run` (its preload library in the process) the guard owns
// these signals and reports every fault in its memory, naming the API call in flight: no
// handler of ours, reads go unguarded. Otherwise the actions in place are kept first, then
// ours installed, so that a fault on another thread in between still finds them.
void install() noexcept {
  g_page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (::dlsym(RTLD_DEFAULT, core::kPreloadCrashContextRegistrar) == nullptr) {
    for (int sig : {SIGSEGV, SIGBUS}) ::sigaction(sig, nullptr, &g_previous[index_of(sig)]);
    for (int sig : {SIGSEGV, SIGBUS}) {
      struct sigaction ours {};
      ours.sa_sigaction = on_fault;
      ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;  // NODEFER: siglongjmp leaves no mask to undo
      sigemptyset(&ours.sa_mask);
      ::sigaction(sig, &ours, nullptr);
    }
    g_active = true;
  }
  g_decided.store(true, std::memory_order_release);
}

void decide() noexcept {
  if (!g_decided.load(std::memory_order_acquire)) std::call_once(g_install, install);
}

}  // namespace

bool read_host_guarded(std::uintptr_t lo, std::uintptr_t hi, void (*read)(void*), void* context,
                       const FloatControls& controls, std::uintptr_t& fault) noexcept {
  if (hi < lo) {  // the range wraps around the top of the address space: a wild pointer
    fault = lo;
    return false;
  }
  decide();
  if (!g_active) {
    read(context);
    return true;
  }
  const std::uintptr_t page = g_page;
  GuardedRead guarded;
  guarded.start = lo;
  guarded.lo = lo & ~(page - 1);
  guarded.hi = hi > UINTPTR_MAX - page ? UINTPTR_MAX : (hi + page - 1) & ~(page - 1);
  guarded.fault = 0;
  GuardedRead* const outer = t_read;
  // No signal mask saved (0): the handler runs with SA_NODEFER, so leaving it changes no mask.
  if (sigsetjmp(guarded.resume, 0) != 0) {
    t_read = outer;
    controls.restore();
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
  if (hi == lo) return true;
  decide();  // g_page
  struct Range {
    std::uintptr_t lo, hi, page;
  } range{lo, hi, g_page};
  auto touch = [](void* context) {
    const Range& r = *static_cast<const Range*>(context);
    for (std::uintptr_t p = r.lo; p < r.hi; p = (p | (r.page - 1)) + 1) {
      (void)*reinterpret_cast<const volatile unsigned char*>(p);
      if (p > UINTPTR_MAX - r.page) break;
    }
  };
  return read_host_guarded(lo, hi, touch, &range, FloatControls::current(), fault);
}

std::string host_memory_not_readable(std::uintptr_t fault, std::uintptr_t lo, std::uintptr_t hi) {
  return fmt::format("host memory not readable at {:#x} (the tensor spans [{:#x}, {:#x}))", fault, lo, hi);
}

}  // namespace mate::tensor::detail
