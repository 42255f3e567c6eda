#include "jit/process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "mate/config.hpp"
#include "mate/device/vendors.hpp"
#include "mate/core/child_environment.hpp"

// The build tools (ninja, compilers) get this process's environment, so that what the user set
// for their toolchain (e.g. LD_LIBRARY_PATH, CCACHE_DIR) reaches it, less the guard allocator's
// preload (mate/core/child_environment.hpp): under `mate guard-run` the compilers are not the
// program being debugged.
extern char** environ;

namespace mate::jit::detail {

namespace {
bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Absolute, symlinks kept as they are (a ccache link behaves by its name). "x/./c++" is written
// "x/c++" (one key for one name), but "a/../c++" stays when a is a symlink: the normal form would
// name another file.
std::string absolute_path(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) return path;
  const std::string normal = p.lexically_normal().string();
  struct stat as_given {}, as_normal {};
  if (::stat(p.c_str(), &as_given) == 0 && ::stat(normal.c_str(), &as_normal) == 0 &&
      as_given.st_dev == as_normal.st_dev && as_given.st_ino == as_normal.st_ino)
    return normal;
  return p.string();
}

// The variables a device compiler reads from its environment and the key records (its vendor
// row's compiler_environment and host_compiler_variable: NVCC_PREPEND_FLAGS, NVCC_APPEND_FLAGS,
// NVCC_CCBIN): an override in this process (tests, embedding applications) must reach the
// compiler too, or the key would lie.
void apply_build_overrides(std::vector<std::string>& env) {
  auto apply = [&](config::Var v) {
    if (config::source(v) != config::Source::Override) return;
    std::string prefix = std::string(config::info(v).name) + "=";
    std::erase_if(env, [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
    if (auto value = config::raw(v)) env.push_back(prefix + *value);
  };
  for (const device::Vendor& vendor : device::vendors()) {
    for (config::Var v : vendor.compiler_environment) apply(v);
    if (vendor.host_compiler_variable) apply(*vendor.host_compiler_variable);
  }
}
}  // namespace

std::string program_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno == ENOENT || errno == ENOTDIR ? "does not exist" : std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return "is a directory";
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) return "is not executable";
  return "";
}

std::string ProcessResult::describe_status() const {
  if (term_signal != 0) return "killed by signal " + std::to_string(term_signal);
  return "exit status " + std::to_string(exit_code);
}

ProcessResult run_process(const std::vector<std::string>& argv, bool stream_to_stderr) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  int pipe_fds[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stream_to_stderr) {
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
  } else {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "pipe for " + argv[0]);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  }
  int devnull_stdin = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull_stdin >= 0) posix_spawn_file_actions_adddup2(&actions, devnull_stdin, 0);

  pid_t pid = -1;
  std::vector<std::string> env = core::unguarded_environment(environ);
  apply_build_overrides(env);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (devnull_stdin >= 0) ::close(devnull_stdin);
  if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);
  if (rc != 0) {
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]);
    throw std::system_error(rc, std::generic_category(), "cannot start " + argv[0]);
  }

  ProcessResult result;
  if (pipe_fds[0] >= 0) {
    char buf[16384];
    for (;;) {
      ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
      if (n > 0) result.output.append(buf, static_cast<std::size_t>(n));
      else if (n < 0 && errno == EINTR) continue;
      else break;
    }
    ::close(pipe_fds[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid " + argv[0]);
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  return result;
}

std::optional<std::string> find_program(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (is_executable_file(name)) return absolute_path(name);
    return std::nullopt;
  }
  std::string path = config::path();
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate)) return absolute_path(candidate);
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace mate::jit::detail
