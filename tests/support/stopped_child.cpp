#include "stopped_child.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace mate::testing {

StoppedChild fork_until_stopped(const std::function<void(int ready_fd)>& body) {
  StoppedChild child;
  int ready[2];
  if (::pipe(ready) != 0) return child;
  child.pid = ::fork();
  if (child.pid == 0) {
    ::close(ready[0]);
    body(ready[1]);
    std::_Exit(3);  // the body finished without being stopped
  }
  ::close(ready[1]);
  if (child.pid > 0) {
    char byte = 0;
    child.stopped = ::read(ready[0], &byte, 1) == 1;
  }
  ::close(ready[0]);
  return child;
}

int kill_child(pid_t pid) {
  int status = 0;
  if (pid <= 0) return status;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace mate::testing
