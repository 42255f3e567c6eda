// A child process stopped at a chosen point, for tests of what a crash (SIGKILL) leaves behind:
// the child runs `body(ready_fd)`, which writes one byte to ready_fd where it wants to be killed
// and then waits; the parent returns once that byte arrives (or the child ended without it) and
// kills the child when it has looked around. A pipe is the handshake: no sleeps.
#pragma once

#include <sys/types.h>

#include <functional>

namespace mate::testing {

struct StoppedChild {
  pid_t pid = -1;
  bool stopped = false;  // the child wrote its byte (false: it ended or failed before)
};

// Forks; the child runs `body` and then _Exit(3) if it returns. Returns pid -1 when fork fails.
StoppedChild fork_until_stopped(const std::function<void(int ready_fd)>& body);
// SIGKILLs and reaps the child; returns its wait status.
int kill_child(pid_t pid);

}  // namespace mate::testing
