// `mate guard-run`'s launcher: builds the child's environment, spawns, forwards signals, and
// maps the child's end to an exit status.
#include "mate/guard/run.hpp"

#include "mate/device/vendors.hpp"

#include "guard/run/preload_blockers.hpp"
#include "mate/core/install_location.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <sstream>

extern char** environ;

namespace mate::guard {

namespace {

std::atomic<pid_t> g_child{0};

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Passes a signal sent to mate on to the program, unless the program got it already: the
// terminal sends Ctrl-C, Ctrl-\ and hangups to the whole foreground process group (si_code
// SI_KERNEL), and one the program sent itself came back to it. A signal a process sent with
// kill to mate (a script's `kill $pid`, Popen.terminate()) is forwarded, even from mate's own
// process group: a `kill 0` or a kill to the whole group then reaches the program twice, the
// lesser harm than losing `kill PID`.
void forward(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  const pid_t child = g_child.load();
  const bool program_has_it = info->si_code == SI_KERNEL || (info->si_code <= 0 && info->si_pid == child);
  if (child > 0 && !program_has_it) kill(child, sig);
  errno = saved_errno;
}

}  // namespace

std::string preload_library_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Next to libmate.so (or, linked statically, in ../lib next to the program's bin/).
  std::vector<fs::path> candidates;
  if (const std::string code = core::code_directory(); !code.empty())
    candidates.push_back(fs::path(code) / "libmate_guard_preload.so");
  if (const std::string tree = core::install_tree(); !tree.empty()) {
    candidates.push_back(fs::path(tree) / "lib" / "libmate_guard_preload.so");
    candidates.push_back(fs::path(tree) / MATE_GUARD_INSTALL_LIBDIR / "libmate_guard_preload.so");
  }
  std::string looked;
  for (const auto& c : candidates) {
    if (fs::exists(c, ec)) return fs::weakly_canonical(c, ec).string();
    looked += (looked.empty() ? "" : ", ") + c.lexically_normal().string();
  }
  throw GuardError("mate guard-run: cannot find the preload library libmate_guard_preload.so (looked in " +
                   looked + "); build the mate_guard_preload target or reinstall MATE");
}

std::vector<std::string> guarded_environment(char** base, const std::string& preload, const GuardRunOptions& options) {
  std::vector<std::string> env;
  bool caching_set[device::kKindCount] = {};  // indexed like device::vendors()
  std::string ld_preload = preload;
  for (char** e = base; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("MATE_GUARD_ALLOCATOR_", 0) == 0) continue;  // ours to set
    if (name == "MATE_GUARD_BACKTRACES" && !options.backtraces) continue;  // --no-backtraces wins
    if (name == "MATE_GUARD_REPORT_FILE" && !options.report_file.empty()) continue;  // --report-file wins
    if (name == "LD_PRELOAD") {
      std::string rest = entry.substr(name.size() + 1);
      if (!rest.empty()) ld_preload += ":" + rest;
      continue;
    }
    for (std::size_t v = 0; v < device::vendors().size(); ++v)
      if (name == device::vendors()[v].caching_allocator_variable) caching_set[v] = true;
    env.push_back(std::move(entry));
  }
  env.push_back("LD_PRELOAD=" + ld_preload);
  env.push_back("MATE_GUARD_ALLOCATOR_AUTO_INSTALL=1");
  env.push_back(std::string("MATE_GUARD_ALLOCATOR_MODE=") + to_string(options.mode));
  env.push_back(std::string("MATE_GUARD_ALLOCATOR_SYNC_ON_FREE=") + (options.sync_on_free ? "1" : "0"));
  env.push_back(std::string("MATE_GUARD_ALLOCATOR_LOG_ALLOCATIONS=") + (options.log_allocations ? "1" : "0"));
  if (!options.backtraces) env.push_back("MATE_GUARD_BACKTRACES=0");
  if (options.align != 0) env.push_back("MATE_GUARD_ALLOCATOR_ALIGN=" + std::to_string(options.align));
  if (options.summary) env.push_back("MATE_GUARD_ALLOCATOR_SUMMARY=1");
  if (options.outcome_fd >= 0) env.push_back("MATE_GUARD_ALLOCATOR_OUTCOME_FD=" + std::to_string(options.outcome_fd));
  if (!options.report_file.empty()) env.push_back("MATE_GUARD_REPORT_FILE=" + options.report_file);
  // A framework's caching allocator would hide each tensor's bounds from the guard: off, for every
  // vendor, unless the user set it.
  for (std::size_t v = 0; v < device::vendors().size(); ++v)
    if (!caching_set[v]) env.push_back(std::string(device::vendors()[v].caching_allocator_variable) + "=1");
  return env;
}

int run_guarded(const std::vector<std::string>& argv, const GuardRunOptions& options) {
  std::vector<std::string> env = guarded_environment(environ, preload_library_path(), options);
  if (const std::string why = why_preload_cannot_reach(argv[0]); !why.empty())
    std::fprintf(stderr, "mate guard-run: warning: %s\n", why.c_str());

  std::vector<char*> envp, args;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  // Signals arriving before the child's pid is known wait (blocked) and are forwarded then.
  // One ignored here stays ignored (not caught), so the program inherits SIG_IGN as it would
  // without mate (a background job's SIGINT).
  sigset_t forwarded, before;
  sigemptyset(&forwarded);
  for (int sig : kForwarded) sigaddset(&forwarded, sig);
  sigprocmask(SIG_BLOCK, &forwarded, &before);
  struct sigaction sa {}, old[std::size(kForwarded)];
  sa.sa_sigaction = forward;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  bool caught[std::size(kForwarded)] = {};
  for (std::size_t i = 0; i < std::size(kForwarded); ++i) {
    sigaction(kForwarded[i], nullptr, &old[i]);
    caught[i] = !(old[i].sa_flags & SA_SIGINFO) && old[i].sa_handler == SIG_IGN ? false : true;
    if (caught[i]) sigaction(kForwarded[i], &sa, nullptr);
  }
  const auto restore = [&] {
    for (std::size_t i = 0; i < std::size(kForwarded); ++i)
      if (caught[i]) sigaction(kForwarded[i], &old[i], nullptr);
    sigprocmask(SIG_SETMASK, &before, nullptr);
  };

  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setsigmask(&attributes, &before);  // the program starts with mate's own mask
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], nullptr, &attributes, args.data(), envp.data());
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) {
    restore();
    std::fprintf(stderr, "mate guard-run: cannot run '%s': %s\n", argv[0].c_str(), std::strerror(rc));
    return 127;
  }
  g_child.store(pid);
  sigprocmask(SIG_SETMASK, &before, nullptr);  // what came meanwhile is forwarded now
  // Waits for the end without reaping, so that the pid cannot be reused by another process
  // while a signal may still be forwarded to it; then stops forwarding and reaps.
  siginfo_t ended {};
  while (waitid(P_PID, static_cast<id_t>(pid), &ended, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  sigprocmask(SIG_BLOCK, &forwarded, nullptr);
  g_child.store(0);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  restore();
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// ---- `mate guard-run --mode auto` (seed 001's workflow: tail first, then the other side) ----

namespace {

// One canary finding the child wrote to its outcome descriptor (allocator_reports.hpp's
// write_outcome): "canary before|after FIRST id ID size SIZE mode MODE".
struct CanaryFinding {
  bool before = false;
  std::size_t first = 0;  // bytes before the start / past the end of the first corrupted byte
  std::uint64_t id = 0;
  std::size_t size = 0;
};

// A descriptor the child inherits (no close-on-exec) and writes its findings to.
int outcome_file() {
  const int fd = memfd_create("mate-guard-outcome", 0);
  if (fd < 0) throw GuardError(std::string("mate guard-run --mode auto: cannot create its outcome file: ") + std::strerror(errno));
  return fd;
}

std::vector<CanaryFinding> read_findings(int fd) {
  std::string text;
  char chunk[4096];
  if (lseek(fd, 0, SEEK_SET) == 0)
    for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) > 0;) text.append(chunk, static_cast<std::size_t>(n));
  std::vector<CanaryFinding> findings;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::string word, side, id_word, size_word;
    CanaryFinding f;
    if (in >> word >> side >> f.first >> id_word >> f.id >> size_word >> f.size && word == "canary" &&
        (side == "before" || side == "after")) {
      f.before = side == "before";
      findings.push_back(f);
    }
  }
  return findings;
}

bool faulted(int status) { return status == 128 + SIGSEGV || status == 128 + SIGBUS; }

std::string describe_finding(const CanaryFinding& f) {
  return std::to_string(f.first) + (f.before ? " bytes before the start" : " bytes past the end") + " of allocation #" +
         std::to_string(f.id) + " of " + std::to_string(f.size) + " bytes";
}

}  // namespace

int run_guarded_auto(const std::vector<std::string>& argv, const GuardRunOptions& options) {
  GuardRunOptions tail = options;
  tail.mode = Mode::Tail;
  tail.outcome_fd = outcome_file();
  const int tail_status = run_guarded(argv, tail);
  const std::vector<CanaryFinding> found = read_findings(tail.outcome_fd);
  close(tail.outcome_fd);
  // A clean run, a fault at the access (its report is the answer) or any other end without a
  // canary finding: nothing to compare.
  if (found.empty()) return tail_status;
  const CanaryFinding& first = found.front();
  // Past the end, tail mode's canary is the padding up to the alignment: no mode faults there.
  // --align 1 would for a malloc block of odd size, but it stops CPython at start-up and does
  // not apply to posix_memalign blocks (tensors): said, not run.
  if (!first.before) {
    std::fprintf(stderr,
                 "mate guard-run --mode auto: verdict: overrun (past the end), within the allocation's alignment "
                 "padding: tail mode found the canary %s corrupted at free, and no mode faults there (head mode "
                 "leaves more bytes before its guard); for a malloc block of odd size in a C or C++ program, "
                 "mate guard-run --align 1 faults at the access\n",
                 describe_finding(first).c_str());
    return tail_status;
  }
  GuardRunOptions again = options;
  again.mode = Mode::Head;
  const std::string how = "head mode";
  std::fprintf(stderr,
               "mate guard-run --mode auto: tail mode found the canary %s corrupted at free, not at the access; "
               "running the same command again in %s to fault at the first invalid access\n",
               describe_finding(first).c_str(), how.c_str());
  again.outcome_fd = outcome_file();
  const int again_status = run_guarded(argv, again);
  const std::vector<CanaryFinding> found_again = read_findings(again.outcome_fd);
  close(again.outcome_fd);
  const char* side = "underrun (before the start)";
  if (faulted(again_status)) {
    std::fprintf(stderr,
                 "mate guard-run --mode auto: verdict: %s; %s faulted at the first invalid access (the report just "
                 "above names the access and the allocation); the tail-mode run saw it only at free, %s\n",
                 side, how.c_str(), describe_finding(first).c_str());
    return again_status;
  }
  if (!found_again.empty()) {
    std::fprintf(stderr,
                 "mate guard-run --mode auto: verdict: %s, caught at free in both runs (%s found %s); the invalid "
                 "access itself never reached a guard region\n",
                 side, how.c_str(), describe_finding(found_again.front()).c_str());
    return again_status;
  }
  std::fprintf(stderr,
               "mate guard-run --mode auto: verdict: %s seen at free by the tail-mode run (%s), but the %s run ended "
               "with status %d and no report: the program does not repeat its allocations from run to run "
               "(--mode auto needs a deterministic program); use the tail-mode report above\n",
               side, describe_finding(first).c_str(), how.c_str(), again_status);
  return tail_status;
}

}  // namespace mate::guard
