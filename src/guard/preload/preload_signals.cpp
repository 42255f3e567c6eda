// The preload's signal interposers: sigaction(), signal() and the C library's other names for
// them (__sigaction, bsd_signal, ssignal, sysv_signal, __sysv_signal, sigset). For SIGSEGV and
// SIGBUS, once the guard's fault handler is installed, the program's handler is kept aside
// (crash_handler/program_signal_actions.hpp) instead of replacing the guard's, and asking for the
// current action answers with the program's: the guard reports a fault in its ranges first
// whatever the program installs later (Python's faulthandler, pytest, a runtime's handler), then
// runs the program's handler. Every other signal, and these two before the guard is installed,
// go to the C library as they are.
//
// Not seen: a raw rt_sigaction system call (the C library's own internal calls, e.g. from
// siginterrupt, included), which replaces the guard's handler as it would any other.
#include <dlfcn.h>
#include <signal.h>

#include <atomic>
#include <cerrno>

#include "guard/crash_handler/program_signal_actions.hpp"
#include "guard/preload/preload_state.hpp"

namespace {

using mate::guard::exchange_program_action;
using mate::guard::holds_program_action;
using Handler = void (*)(int);
using SigactionFunction = int (*)(int, const struct sigaction*, struct sigaction*);
using SignalFunction = Handler (*)(int, Handler);

// The next definitions (the C library's), looked up once.
constinit std::atomic<SigactionFunction> g_sigaction{nullptr};
constinit std::atomic<SignalFunction> g_signal{nullptr};
constinit std::atomic<SignalFunction> g_sysv_signal{nullptr};
constinit std::atomic<SignalFunction> g_sigset{nullptr};

template <typename F>
F next_definition(std::atomic<F>& cache, const char* name) noexcept {
  F f = cache.load(std::memory_order_acquire);
  if (f != nullptr) return f;
  // dlsym may allocate: the preload's arena serves it.
  mate::guard::preload::Inside inside;
  f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  cache.store(f, std::memory_order_release);
  return f;
}

SigactionFunction real_sigaction() noexcept { return next_definition(g_sigaction, "sigaction"); }

// Calls the next definition of `name` with `args`; without one, fails as the C library would
// have: errno ENOSYS and `failure` (-1, SIG_ERR).
template <typename F, typename R, typename... Args>
R call_next(std::atomic<F>& cache, const char* name, R failure, Args... args) noexcept {
  const F next = next_definition(cache, name);
  if (next == nullptr) {
    errno = ENOSYS;
    return failure;
  }
  return next(args...);
}

// signal()'s action, as the C library builds it: the handler's own signal blocked while it runs,
// interrupted system calls restarted.
Handler bsd_style(int sig, Handler handler) noexcept {
  struct sigaction act {}, old {};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  sigaddset(&act.sa_mask, sig);
  act.sa_flags = SA_RESTART;
  exchange_program_action(sig, &act, &old);
  return old.sa_handler;
}

// SIG_ERR is no disposition: refused with EINVAL, as the C library refuses it.
bool refused(Handler handler) noexcept {
  if (handler != SIG_ERR) return false;
  errno = EINVAL;
  return true;
}

}  // namespace

namespace mate::guard::preload {

// Gives the fault handler the C library's sigaction before it installs (preload start).
void resolve_signal_functions() noexcept { set_system_sigaction(real_sigaction()); }

}  // namespace mate::guard::preload

#define MATE_EXPORT extern "C" __attribute__((visibility("default")))

MATE_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  if (exchange_program_action(sig, act, old)) return 0;
  return call_next(g_sigaction, "sigaction", -1, sig, act, old);
}

MATE_EXPORT int __sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return sigaction(sig, act, old);
}

MATE_EXPORT Handler signal(int sig, Handler handler) noexcept {
  if (holds_program_action(sig)) {
    if (refused(handler)) return SIG_ERR;
    return bsd_style(sig, handler);
  }
  return call_next(g_signal, "signal", SIG_ERR, sig, handler);
}

MATE_EXPORT Handler bsd_signal(int sig, Handler handler) noexcept { return signal(sig, handler); }
MATE_EXPORT Handler ssignal(int sig, Handler handler) noexcept { return signal(sig, handler); }

// System V's one-shot signal(): reset to the default when delivered, not blocked meanwhile,
// system calls not restarted.
MATE_EXPORT Handler sysv_signal(int sig, Handler handler) noexcept {
  if (holds_program_action(sig)) {
    if (refused(handler)) return SIG_ERR;
    struct sigaction act {}, old {};
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    act.sa_flags = SA_RESETHAND | SA_NODEFER;
    exchange_program_action(sig, &act, &old);
    return old.sa_handler;
  }
  return call_next(g_sysv_signal, "sysv_signal", SIG_ERR, sig, handler);
}

MATE_EXPORT Handler __sysv_signal(int sig, Handler handler) noexcept { return sysv_signal(sig, handler); }

// System V's sigset(): SIG_HOLD blocks the signal; a handler is installed with the signal
// unblocked; SIG_HOLD is returned when it was blocked before.
MATE_EXPORT Handler sigset(int sig, Handler disposition) noexcept {
  if (!holds_program_action(sig)) return call_next(g_sigset, "sigset", SIG_ERR, sig, disposition);
  if (refused(disposition)) return SIG_ERR;
  sigset_t set, before;
  sigemptyset(&set);
  sigaddset(&set, sig);
  struct sigaction old {};
  if (disposition == SIG_HOLD) {
    if (sigprocmask(SIG_BLOCK, &set, &before) < 0) return SIG_ERR;
    if (sigismember(&before, sig) == 1) return SIG_HOLD;
    exchange_program_action(sig, nullptr, &old);
    return old.sa_handler;
  }
  struct sigaction act {};
  act.sa_handler = disposition;
  sigemptyset(&act.sa_mask);
  exchange_program_action(sig, &act, &old);
  if (sigprocmask(SIG_UNBLOCK, &set, &before) < 0) return SIG_ERR;
  return sigismember(&before, sig) == 1 ? SIG_HOLD : old.sa_handler;
}
