// The symbolizer: addr2line started for a report, fed the frames' module offsets, its answers
// written as function, file and line (see symbolize.hpp).
#include "guard/stack/symbolize.hpp"

#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "mate/config.hpp"
#include "mate/core/signal_safe_format.hpp"
#include "guard/report.hpp"
#include "guard/stack/stack_depot.hpp"

extern char** environ;

namespace mate::guard {

namespace {

// For the whole backtrace: a huge debug-info file is not worth a hung report.
constexpr int kTimeoutMs = 5000;
constexpr std::size_t kOutputBytes = 16384;
constexpr std::size_t kPathBytes = 512;
constexpr int kMaxEnvironment = 512;

struct FrameInfo {
  std::uintptr_t pc = 0;
  std::uintptr_t base = 0;      // the module's load address (dli_fbase), for module+offset
  std::uintptr_t address = 0;   // what the symbolizer is asked: pc - 1 (the call) less the load bias
  const void* object = nullptr;  // the module's link_map: frames of one module share it
  const char* module = nullptr;  // the file to give the symbolizer
  const char* shown = nullptr;   // the module's name in the report (dli_fname)
  const char* symbol = nullptr;  // dli_sname, when the dynamic symbol table has one
  std::size_t text_begin = 0, text_end = 0;  // this frame's lines in Scratch::output
  bool asked = false;  // its module's symbolizer run is done
};

// One report at a time uses these; a second thread reporting meanwhile prints plain frames.
struct Scratch {
  FrameInfo frames[kMaxFrames];
  char output[kOutputBytes];
  std::size_t used = 0;
  char symbolizer[kPathBytes];
  char main_program[64];  // /proc/<pid>/exe
  char addresses[kMaxFrames][core::kNumberTextCapacity + 2];
  const char* environment[kMaxEnvironment];
};
constinit Scratch g_scratch{};  // constant-initialized: no start-up code to page in (preload_layout.ld)
std::atomic<bool> g_busy{false};

bool enabled() noexcept {
  const char* text = config::raw_env_unsafe(config::Var::MATE_GUARD_SYMBOLIZE);
  const config::Scalar value = config::parse_scalar(config::Var::MATE_GUARD_SYMBOLIZE, text == nullptr ? "" : text);
  return !value.ok || value.boolean;  // a bad value is mate env's to report; the default is on
}

// addr2line in a directory of PATH, into `out`.
bool find_symbolizer(char* out) noexcept {
  const char* path = config::raw_env_unsafe(config::Var::PATH);
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (true) {
    const std::size_t cut = dirs.find(':');
    const std::string_view dir = dirs.substr(0, cut);
    constexpr std::string_view kName = "/addr2line";
    if (!dir.empty() && dir[0] == '/' && dir.size() + kName.size() < kPathBytes) {  // never ./addr2line
      std::memcpy(out, dir.data(), dir.size());
      std::memcpy(out + dir.size(), kName.data(), kName.size() + 1);
      if (::access(out, X_OK) == 0) return true;
    }
    if (cut == std::string_view::npos) return false;
    dirs.remove_prefix(cut + 1);
  }
}

// The environment without LD_PRELOAD (the guard's preload among them) and the guard's bootstrap
// variables: the symbolizer is not the program being debugged.
char* const* symbolizer_environment(Scratch& s) noexcept {
  int n = 0;
  for (char** e = environ; e != nullptr && *e != nullptr && n < kMaxEnvironment - 1; ++e) {
    const std::string_view entry(*e);
    if (entry.rfind("LD_PRELOAD=", 0) == 0 || entry.rfind("MATE_GUARD_ALLOCATOR_", 0) == 0) continue;
    s.environment[n++] = *e;
  }
  s.environment[n] = nullptr;
  return const_cast<char* const*>(s.environment);
}

long long now_ms() noexcept {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long long>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

// Runs the symbolizer on the frames of one module (`members`, in frame order) and records
// where each frame's lines are. Returns false when it could not be run.
bool symbolize_module(Scratch& s, const char* module, const int* members, int count, char* const* envp,
                      long long deadline) noexcept {
  const char* argv[8 + kMaxFrames + 1];
  int argc = 0;
  argv[argc++] = s.symbolizer;
  for (const char* flag : {"-C", "-f", "-i", "-p", "-a", "-e"}) argv[argc++] = flag;
  argv[argc++] = module;
  for (int i = 0; i < count; ++i) {
    const core::NumberText hex = core::hex_text(s.frames[members[i]].address);
    char* text = s.addresses[members[i]];
    text[0] = '0';
    text[1] = 'x';
    std::memcpy(text + 2, hex.chars, sizeof hex.chars);
    argv[argc++] = text;
  }
  argv[argc] = nullptr;

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  // As glibc's posix_spawn does: no signal handler of the program may run in the child, which
  // shares the parent's memory until execve.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = ::vfork();
  if (pid == 0) {
    // The child: only async-signal-safe calls on its own variables until it is addr2line.
    for (int sig = 1; sig < NSIG; ++sig) {
      struct sigaction action {};
      if (::sigaction(sig, nullptr, &action) == 0 && action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN) {
        action.sa_handler = SIG_DFL;
        action.sa_flags = 0;
        ::sigaction(sig, &action, nullptr);
      }
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (fds[1] == 1) ::fcntl(1, F_SETFD, 0);  // stdout was closed: the pipe already is fd 1
    else ::dup2(fds[1], 1);
    ::fcntl(1, F_SETFL, 0);  // blocking for addr2line (O_NONBLOCK is the open file's, shared)
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 2);
    ::execve(s.symbolizer, const_cast<char* const*>(argv), envp);
    ::_exit(127);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return false;
  }
  const std::size_t start = s.used;
  bool timed_out = false;
  while (s.used < kOutputBytes) {
    const long long left = deadline - now_ms();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;  // a signal of the program's: the deadline stands
    if (ready <= 0) {
      timed_out = ready == 0;
      if (ready < 0) break;
      continue;
    }
    const ssize_t n = ::read(fds[0], s.output + s.used, kOutputBytes - s.used);
    if (n > 0) s.used += static_cast<std::size_t>(n);
    else if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    else break;
  }
  ::close(fds[0]);
  if (timed_out || s.used == kOutputBytes) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // "0x<address>: function at file:line" starts each frame, " (inlined by) ..." lines follow.
  int member = -1;
  std::size_t at = start;
  while (at < s.used) {
    std::size_t end = at;
    while (end < s.used && s.output[end] != '\n') ++end;
    if (end == s.used) break;  // a cut-off last line
    const bool first_line = end - at > 2 && s.output[at] == '0' && s.output[at + 1] == 'x';
    if (first_line) {
      if (++member >= count) break;
      s.frames[members[member]].text_begin = at;
    }
    if (member >= 0) s.frames[members[member]].text_end = end + 1;
    at = end + 1;
  }
  return member >= 0;
}

void write_frame(ReportWriter& w, const Scratch& s, int index) noexcept {
  const FrameInfo& f = s.frames[index];
  w.str("    #").dec(static_cast<std::uint64_t>(index)).chr(' ').hex(f.pc);
  std::string_view lines(s.output + f.text_begin, f.text_end - f.text_begin);
  // The first line, without its "0x...: " and a symbolizer's "?? ??:0" for code it cannot name.
  std::string_view first = lines.substr(0, lines.find('\n'));
  if (const std::size_t colon = first.find(": "); colon != std::string_view::npos) first.remove_prefix(colon + 2);
  if (first.empty() || first.rfind("??", 0) == 0) {
    if (f.symbol != nullptr) w.str(" in ").str(f.symbol);
  } else {
    w.str(" in ");
    for (char c : first) w.chr(c);
  }
  w.str(" (").str(f.shown != nullptr ? f.shown : "?").str("+").hex(f.pc - f.base).str(")\n");
  // Inlined-by lines, indented under the frame.
  std::size_t next = lines.find('\n');
  while (next != std::string_view::npos && next + 1 < lines.size()) {
    const std::size_t end = lines.find('\n', next + 1);
    const std::string_view line = lines.substr(next + 1, end == std::string_view::npos ? end : end - next - 1);
    w.str("       ");
    for (char c : line) w.chr(c);
    w.chr('\n');
    next = end;
  }
}

}  // namespace

bool write_symbolized_frames(int fd, void* const* frames, int count) noexcept {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Not in sanitizer builds (MATE's own test configurations): the vfork child would run
  // instrumented code on the parent's stack and shadow memory, and the parent then faults
  // (AddressSanitizer); under ThreadSanitizer the vfork allocates (ld.so's calloc), which a fault
  // handler must not.
  if (count > 0) return false;
#endif
  if (count <= 0 || count > kMaxFrames || !enabled()) return false;
  if (g_busy.exchange(true, std::memory_order_acquire)) return false;
  const int saved_errno = errno;  // a report must not change what the program sees
  Scratch& s = g_scratch;
  s.used = 0;
  bool named = false;
  const long long deadline = now_ms() + kTimeoutMs;  // for the whole backtrace
  if (find_symbolizer(s.symbolizer)) {
    // /proc/<pid>/exe names the main program whatever its path was (relative, or changed since).
    std::memcpy(s.main_program, "/proc/", 6);
    const core::NumberText pid = core::decimal_text(static_cast<std::uint64_t>(::getpid()));
    const std::size_t digits = std::strlen(pid.chars);
    std::memcpy(s.main_program + 6, pid.chars, digits);
    std::memcpy(s.main_program + 6 + digits, "/exe", 5);
    for (int i = 0; i < count; ++i) {
      FrameInfo& f = s.frames[i];
      f = FrameInfo{};
      f.pc = reinterpret_cast<std::uintptr_t>(frames[i]);
      Dl_info info{};
      link_map* map = nullptr;
      if (dladdr1(reinterpret_cast<void*>(f.pc - 1), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
          map == nullptr)
        continue;
      f.base = reinterpret_cast<std::uintptr_t>(info.dli_fbase);
      f.object = map;
      f.symbol = info.dli_sname;
      f.shown = info.dli_fname;
      // The main program has no name in its link_map: /proc/<pid>/exe is its file, whatever
      // path started it. Libraries keep theirs (relative ones are relative to the directory
      // the program was in when it loaded them).
      f.module = map->l_name[0] == '\0' ? s.main_program : map->l_name;
      // Symbolizers take addresses as in the file: less the load bias (0 for fixed-address
      // programs), whatever the first segment's address.
      f.address = f.pc - 1 - map->l_addr;
    }
    char* const* envp = symbolizer_environment(s);
    // One symbolizer run per module, in order of first appearance.
    for (int i = 0; i < count; ++i) {
      if (s.frames[i].module == nullptr || s.frames[i].asked) continue;
      int members[kMaxFrames];
      int n = 0;
      for (int j = i; j < count; ++j) {
        if (s.frames[j].module == nullptr || s.frames[j].object != s.frames[i].object) continue;
        s.frames[j].asked = true;
        members[n++] = j;
      }
      named = symbolize_module(s, s.frames[i].module, members, n, envp, deadline) || named;
    }
  }
  if (named) {
    ReportWriter w(fd);
    for (int i = 0; i < count; ++i) write_frame(w, s, i);
  }
  g_busy.store(false, std::memory_order_release);
  errno = saved_errno;
  return named;
}

}  // namespace mate::guard
