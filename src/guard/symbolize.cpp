#include "symbolize.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "mate/config.hpp"
#include "mate/core/signal_safe_format.hpp"
#include "report.hpp"
#include "stack_depot.hpp"

extern char** environ;

namespace mate::guard {

namespace {

constexpr int kTimeoutMs = 5000;  // per module; a huge debug-info file is not worth a hung report
constexpr std::size_t kOutputBytes = 16384;
constexpr std::size_t kPathBytes = 512;
constexpr int kMaxEnvironment = 512;

struct FrameInfo {
  std::uintptr_t pc = 0;
  std::uintptr_t base = 0;      // the module's load address (dli_fbase)
  std::uintptr_t address = 0;   // what the symbolizer is asked: pc - 1 (the call), module-relative
  const char* module = nullptr;  // dli_fname
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
Scratch g_scratch;
std::atomic<bool> g_busy{false};

bool enabled() noexcept {
  const char* text = config::raw_env_unsafe(config::Var::MATE_GUARD_SYMBOLIZE);
  const config::Scalar value = config::parse_scalar(config::Var::MATE_GUARD_SYMBOLIZE, text == nullptr ? "" : text);
  return !value.ok || value.b;  // a bad value is mate env's to report; the default is on
}

// addr2line in a directory of PATH, into `out`.
bool find_symbolizer(char* out) noexcept {
  const char* path = config::raw_env_unsafe(config::Var::PATH);
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (true) {
    const std::size_t cut = dirs.find(':');
    const std::string_view dir = dirs.substr(0, cut);
    constexpr std::string_view kName = "/addr2line";
    if (!dir.empty() && dir.size() + kName.size() < kPathBytes) {
      std::memcpy(out, dir.data(), dir.size());
      std::memcpy(out + dir.size(), kName.data(), kName.size() + 1);
      if (::access(out, X_OK) == 0) return true;
    }
    if (cut == std::string_view::npos) return false;
    dirs.remove_prefix(cut + 1);
  }
}

// The environment without the guard (its preload and bootstrap variables): the symbolizer is
// not the program being debugged.
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
bool symbolize_module(Scratch& s, const char* module, const int* members, int count) noexcept {
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
  char* const* envp = symbolizer_environment(s);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  const pid_t pid = ::vfork();
  if (pid == 0) {
    // The child: only dup2, open and execve until it is addr2line.
    ::dup2(fds[1], 1);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 2);
    ::execve(s.symbolizer, const_cast<char* const*>(argv), envp);
    ::_exit(127);
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return false;
  }
  const std::size_t start = s.used;
  const long long deadline = now_ms() + kTimeoutMs;
  bool timed_out = false;
  while (s.used < kOutputBytes) {
    const long long left = deadline - now_ms();
    pollfd p{fds[0], POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) == 0) {
      timed_out = true;
      break;
    }
    const ssize_t n = ::read(fds[0], s.output + s.used, kOutputBytes - s.used);
    if (n > 0) s.used += static_cast<std::size_t>(n);
    else if (n < 0 && errno == EINTR) continue;
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
  w.str(" (").str(f.module != nullptr ? f.module : "?").str("+").hex(f.pc - f.base).str(")\n");
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
  if (count <= 0 || count > kMaxFrames || !enabled()) return false;
  if (g_busy.exchange(true, std::memory_order_acquire)) return false;
  Scratch& s = g_scratch;
  s.used = 0;
  bool named = false;
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
      if (dladdr(reinterpret_cast<void*>(f.pc - 1), &info) == 0 || info.dli_fbase == nullptr) continue;
      f.base = reinterpret_cast<std::uintptr_t>(info.dli_fbase);
      f.module = info.dli_fname;
      f.symbol = info.dli_sname;
      // Shared objects and PIE programs are asked module-relative addresses, fixed-address
      // programs (ET_EXEC) absolute ones.
      const auto* header = static_cast<const Elf64_Ehdr*>(info.dli_fbase);
      f.address = header->e_type == ET_EXEC ? f.pc - 1 : f.pc - 1 - f.base;
    }
    // One symbolizer run per module, in order of first appearance.
    for (int i = 0; i < count; ++i) {
      if (s.frames[i].module == nullptr || s.frames[i].asked) continue;
      int members[kMaxFrames];
      int n = 0;
      for (int j = i; j < count; ++j) {
        if (s.frames[j].module == nullptr || s.frames[j].base != s.frames[i].base) continue;
        s.frames[j].asked = true;
        members[n++] = j;
      }
      const char* module = s.frames[i].module;
      if (module[0] != '/') module = s.main_program;  // the program itself, started by a relative path
      named = symbolize_module(s, module, members, n) || named;
    }
  }
  if (named) {
    ReportWriter w(fd);
    for (int i = 0; i < count; ++i) write_frame(w, s, i);
  }
  g_busy.store(false, std::memory_order_release);
  return named;
}

}  // namespace mate::guard
