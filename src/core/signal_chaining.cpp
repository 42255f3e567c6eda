// Passing a signal on to a saved action (see mate/core/signal_chaining.hpp).
#include "mate/core/signal_chaining.hpp"

#include <pthread.h>

namespace mate::core {

void restore_default_action(int sig, SetActionFunction set_action) noexcept {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  set_action(sig, &dfl, nullptr);
}

void run_as_the_kernel_would(int sig, const struct sigaction& action, siginfo_t* info, void* context) noexcept {
  sigset_t mask, before;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  for (int s = 1; s < NSIG; ++s)
    if (sigismember(&action.sa_mask, s) == 1) sigaddset(&mask, s);
  // Our handler may run with SA_NODEFER (the read guard's does): the signal is then not blocked
  // now, and must be added unless the program's action asked for SA_NODEFER too.
  if ((action.sa_flags & SA_NODEFER) != 0) sigdelset(&mask, sig);
  else sigaddset(&mask, sig);
  pthread_sigmask(SIG_SETMASK, &mask, &before);
  if ((action.sa_flags & SA_SIGINFO) != 0) action.sa_sigaction(sig, info, context);
  else action.sa_handler(sig);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

}  // namespace mate::core
