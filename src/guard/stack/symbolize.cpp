// The symbolizer: addr2line started for a report, fed the frames' module offsets, its answers
// written as function, file and line (see symbolize.hpp).
#include "guard/stack/symbolize.hpp"

#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
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
#include "guard/stack/elf_symbols.hpp"
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
  std::uintptr_t bias = 0;      // its load bias (l_addr): link-time address = run-time - bias
  std::uintptr_t address = 0;   // what the symbolizer is asked: the instruction (pc - 1 for a
                                // return address, pc for the faulting one) less the load bias
  const void* object = nullptr;  // the module's link_map: frames of one module share it
  const char* module = nullptr;  // the file to give the symbolizer
  const char* shown = nullptr;   // the module's name in the report (dli_fname)
  ContainingSymbol containing;   // the symbol table's function around `address` (elf_symbols.hpp)
  std::size_t text_begin = 0, text_end = 0;  // this frame's lines in Scratch::output
  std::size_t name_begin = 0, name_end = 0;  // the symbolizer's line for containing.start
  bool asked = false;  // its module's symbolizer run is done
};

// One question to the symbolizer: a frame's instruction, or the start of the symbol containing
// it (its name, demangled, for a frame without line information).
struct Query {
  int frame;
  bool symbol_start;
};

// One report at a time uses these; a second thread reporting meanwhile prints plain frames.
struct Scratch {
  FrameInfo frames[kMaxFrames];
  char output[kOutputBytes];
  std::size_t used = 0;
  char symbolizer[kPathBytes];
  char main_program[64];  // /proc/<pid>/exe
  char addresses[2 * kMaxFrames][core::kNumberTextCapacity + 2];
  const char* environment[kMaxEnvironment];
  unsigned char symbol_table[16384];  // a symbol table's entries as they are read
  ContainingSymbol containing[kMaxFrames];  // one module's answers (off the stack: a fault handler
                                            // may run on a small alternate stack)
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

// A caught signal's disposition back to the default, with the raw system call (the kernel's
// struct: handler, flags, restorer, mask); ignored and default ones stay as they are.
void reset_to_default(int sig) noexcept {
  struct KernelAction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    unsigned long mask;
  } current{}, dfl{};
  if (::syscall(SYS_rt_sigaction, sig, nullptr, &current, sizeof current.mask) != 0) return;
  if (current.handler == SIG_DFL || current.handler == SIG_IGN) return;
  dfl.handler = SIG_DFL;
  ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof dfl.mask);
}

long long now_ms() noexcept {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long long>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

// Runs the symbolizer on the questions about one module (`queries`, in frame order) and records
// where each answer's lines are. Returns false when it could not be run.
bool symbolize_module(Scratch& s, const char* module, const Query* queries, int count, char* const* envp,
                      long long deadline) noexcept {
  const char* argv[8 + 2 * kMaxFrames + 1];
  int argc = 0;
  argv[argc++] = s.symbolizer;
  for (const char* flag : {"-C", "-f", "-i", "-p", "-a", "-e"}) argv[argc++] = flag;
  argv[argc++] = module;
  for (int i = 0; i < count; ++i) {
    const FrameInfo& f = s.frames[queries[i].frame];
    const core::NumberText hex = core::hex_text(queries[i].symbol_start ? f.containing.start : f.address);
    char* text = s.addresses[i];
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
    // With the raw system call: in the guard's preload, sigaction() is its own interposer, whose
    // bookkeeping this child shares with the parent until execve.
    for (int sig = 1; sig < NSIG; ++sig) reset_to_default(sig);
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
  // A local count while reading: the calls in the loop (poll, read) could change the global as far
  // as the compiler knows, and GCC 13's fortified read() then warns of an overflow it cannot rule out.
  std::size_t used = s.used;
  bool timed_out = false;
  while (used < kOutputBytes) {
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
    const ssize_t n = ::read(fds[0], s.output + used, kOutputBytes - used);
    if (n > 0) used += static_cast<std::size_t>(n);
    else if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    else break;
  }
  ::close(fds[0]);
  s.used = used;
  if (timed_out || s.used == kOutputBytes) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // "0x<address>: function at file:line" starts each answer, " (inlined by) ..." lines follow.
  int member = -1;
  std::size_t at = start;
  while (at < s.used) {
    std::size_t end = at;
    while (end < s.used && s.output[end] != '\n') ++end;
    if (end == s.used) break;  // a cut-off last line
    const bool first_line = end - at > 2 && s.output[at] == '0' && s.output[at + 1] == 'x';
    if (first_line && ++member >= count) break;
    if (member >= 0) {
      FrameInfo& f = s.frames[queries[member].frame];
      if (queries[member].symbol_start) {
        if (first_line) f.name_begin = at;
        f.name_end = end;
      } else {
        if (first_line) f.text_begin = at;
        f.text_end = end + 1;
      }
    }
    at = end + 1;
  }
  return member >= 0;
}

// An answer's first line without its "0x...: " (the function, then " at file:line").
std::string_view answer(const Scratch& s, std::size_t begin, std::size_t end) noexcept {
  std::string_view line(s.output + begin, end - begin);
  line = line.substr(0, line.find('\n'));
  if (const std::size_t colon = line.find(": "); colon != std::string_view::npos) line.remove_prefix(colon + 2);
  return line;
}

// True when the answer names a source line: "function at file:line[ (discriminator N)]" with a
// known file and line (a file known from the symbol table alone comes with line "?").
bool has_line(std::string_view first) noexcept {
  const std::size_t at = first.find(" at ");
  if (at == std::string_view::npos || first.rfind("??", 0) == 0) return false;
  std::string_view location = first.substr(at + 4);
  location = location.substr(0, location.find(" ("));
  const std::size_t colon = location.rfind(':');
  if (colon == std::string_view::npos || location.rfind("??", 0) == 0) return false;
  const std::string_view line = location.substr(colon + 1);
  return !line.empty() && line != "?" && line != "0";
}

// "    #N 0xPC in function at file:line (module+0xOFFSET)" where the debug information names the
// line; "in symbol+0xOFFSET" from the symbol table where it does not (the symbol containing the
// address, never merely the nearest one below it); the module and offset alone where neither can.
void write_frame(ReportWriter& w, const Scratch& s, int index) noexcept {
  const FrameInfo& f = s.frames[index];
  w.str("    #").dec(static_cast<std::uint64_t>(index)).chr(' ').hex(f.pc);
  const std::string_view first = f.text_end > f.text_begin ? answer(s, f.text_begin, f.text_end) : std::string_view{};
  const bool line_known = has_line(first);
  if (line_known) {
    w.str(" in ");
    for (char c : first) w.chr(c);
  } else if (f.containing.found) {
    // The demangled name the symbolizer gave for the symbol's start, else the name in the file.
    std::string_view name = f.name_end > f.name_begin ? answer(s, f.name_begin, f.name_end) : std::string_view{};
    name = name.substr(0, name.find(" at "));
    if (name.empty() || name.rfind("??", 0) == 0) name = f.containing.name;
    w.str(" in ");
    for (char c : name) w.chr(c);
    w.str("+").hex(f.pc - f.bias - f.containing.start);
  }
  w.str(" (").str(f.shown != nullptr ? f.shown : "?").str("+").hex(f.pc - f.base).str(")\n");
  if (!line_known) return;
  // Inlined-by lines, indented under the frame.
  std::string_view lines(s.output + f.text_begin, f.text_end - f.text_begin);
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

bool write_symbolized_frames(int fd, void* const* frames, int count, bool first_is_exact) noexcept {
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
      // A return address's call is the instruction before it; a faulting instruction is itself
      // (pc - 1 could lie in the function before, when it is a function's first instruction).
      const std::uintptr_t instruction = i == 0 && first_is_exact ? f.pc : f.pc - 1;
      Dl_info info{};
      link_map* map = nullptr;
      if (dladdr1(reinterpret_cast<void*>(instruction), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) ==
              0 ||
          map == nullptr)
        continue;
      f.base = reinterpret_cast<std::uintptr_t>(info.dli_fbase);
      f.bias = map->l_addr;
      f.object = map;
      f.shown = info.dli_fname;
      // The main program has no name in its link_map: /proc/<pid>/exe is its file, whatever
      // path started it. Libraries keep theirs (relative ones are relative to the directory
      // the program was in when it loaded them).
      f.module = map->l_name[0] == '\0' ? s.main_program : map->l_name;
      // Symbolizers take addresses as in the file: less the load bias (0 for fixed-address
      // programs), whatever the first segment's address.
      f.address = instruction - map->l_addr;
    }
    char* const* envp = symbolizer_environment(s);
    // One symbolizer run per module, in order of first appearance.
    for (int i = 0; i < count; ++i) {
      if (s.frames[i].module == nullptr || s.frames[i].asked) continue;
      int members[kMaxFrames];
      std::uint64_t addresses[kMaxFrames];
      int n = 0;
      for (int j = i; j < count; ++j) {
        if (s.frames[j].module == nullptr || s.frames[j].object != s.frames[i].object) continue;
        s.frames[j].asked = true;
        addresses[n] = s.frames[j].address;
        members[n++] = j;
      }
      // The symbol table's answer, for frames the debug information does not cover.
      find_containing_symbols(s.frames[i].module, addresses, n, s.containing, s.symbol_table, sizeof s.symbol_table);
      Query queries[2 * kMaxFrames];
      int q = 0;
      for (int k = 0; k < n; ++k) {
        FrameInfo& f = s.frames[members[k]];
        f.containing = s.containing[k];
        queries[q++] = {members[k], false};
        if (f.containing.found) queries[q++] = {members[k], true};
      }
      named = symbolize_module(s, s.frames[i].module, queries, q, envp, deadline) || named;
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
