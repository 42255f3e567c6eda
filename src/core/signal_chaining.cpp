// Passing a signal on to a saved action (see mate/core/signal_chaining.hpp).
#include "mate/core/signal_chaining.hpp"

#include <pthread.h>
#include <ucontext.h>

namespace mate::core {

void restore_default_action(int sig, SetActionFunction set_action) noexcept {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  set_action(sig, &dfl, nullptr);
}

void run_as_the_kernel_would(int sig, const struct sigaction& action, siginfo_t* info, void* context) noexcept {
  // The mask the kernel would have set: the interrupted code's (the signal context's, not this
  // thread's now, which our own action's mask and SA_NODEFER shaped), the action's sa_mask, and
  // the signal itself unless SA_NODEFER.
  sigset_t mask, before;
  if (context != nullptr) {
    mask = static_cast<const ucontext_t*>(context)->uc_sigmask;
  } else {
    pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  }
  for (int s = 1; s < NSIG; ++s)
    if (sigismember(&action.sa_mask, s) == 1) sigaddset(&mask, s);
  if ((action.sa_flags & SA_NODEFER) == 0) sigaddset(&mask, sig);
  pthread_sigmask(SIG_SETMASK, &mask, &before);
  if ((action.sa_flags & SA_SIGINFO) != 0) action.sa_sigaction(sig, info, context);
  else action.sa_handler(sig);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

}  // namespace mate::core
