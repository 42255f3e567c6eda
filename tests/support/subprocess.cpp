#include "subprocess.hpp"

#include "mate/core/child_environment.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

extern char** environ;

namespace mate::testing {

namespace {

void check(int rc, const char* what) {
  if (rc != 0) throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

}  // namespace

RunResult run(const std::vector<std::string>& argv, const RunOptions& options) {
  std::vector<std::string> env_strings;
  // The suite's guard mode guards the test process, not the programs its tests start.
  for (std::string& entry : mate::core::unguarded_environment(environ)) {
    if (entry.rfind("MATE_", 0) == 0) continue;
    if (options.env.count(entry.substr(0, entry.find('=')))) continue;
    env_strings.push_back(std::move(entry));
  }
  for (const auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  int out_pipe[2], err_pipe[2], in_pipe[2];
  check(pipe2(out_pipe, O_CLOEXEC), "pipe");
  check(pipe2(err_pipe, O_CLOEXEC), "pipe");
  check(pipe2(in_pipe, O_CLOEXEC), "pipe");
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    if (options.cwd && chdir(options.cwd->c_str()) != 0) _exit(126);
    execve(args[0], args.data(), envp.data());
    // Fall back to a PATH search for bare program names.
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(in_pipe[0]);
  if (options.stdin_text) {
    const std::string& text = *options.stdin_text;
    std::size_t done = 0;
    while (done < text.size()) {
      ssize_t n = write(in_pipe[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
  }
  close(in_pipe[1]);

  RunResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  char buf[65536];
  while (open_count > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  return result;
}

}  // namespace mate::testing
