// Heap bugs and signal handling run under `mate guard-run` by tests/guard/test_guard_reports.cpp:
// what the guard's reports show (the access stack, allocated by, freed by), and that they reach
// the user whatever the program does with its SIGSEGV handler and its stderr.
//
//   report_child MODE [ARG]
//
// The functions that touch memory are not inlined, so each has its own frame to be named.
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

volatile char g_sink;

__attribute__((noinline)) void write_one_past_the_end(char* p, std::size_t n) {
  p[n] = 1;
  asm volatile("" ::: "memory");
}

}  // namespace

// A frame whose unwind rule the table unwinder does not handle (its frame address kept in r12,
// as code with unusual frames has it), so that the access stack comes from the C++ unwinder: it
// writes the byte at p.
extern "C" void report_child_write_with_odd_frame(char* p);
asm(R"(
  .text
  .p2align 4
  .globl report_child_write_with_odd_frame
  .type report_child_write_with_odd_frame, @function
report_child_write_with_odd_frame:
  .cfi_startproc
  push %r12
  .cfi_def_cfa_offset 16
  .cfi_offset %r12, -16
  mov %rsp, %r12
  .cfi_def_cfa_register %r12
  movb $1, (%rdi)
  .cfi_def_cfa_register %rsp
  pop %r12
  .cfi_restore %r12
  .cfi_def_cfa_offset 8
  ret
  .cfi_endproc
  .size report_child_write_with_odd_frame, .-report_child_write_with_odd_frame
)");

namespace {

__attribute__((noinline)) void write_before_the_start(char* p) {
  p[-4] = 1;
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void release_buffer(char* p) {
  std::free(p);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void read_after_free(const char* p) {
  g_sink = p[10];
  asm volatile("" ::: "memory");
}

char* allocate_buffer(std::size_t n) {
  auto* p = static_cast<char*>(std::malloc(n));
  std::memset(p, 0, n);
  return p;
}

void say(const char* text) {
  ssize_t ignored = ::write(1, text, std::strlen(text));
  (void)ignored;
}

void exiting_handler(int) {
  say("program handler ran\n");
  _exit(42);
}

void returning_handler(int) { say("program handler ran and returned\n"); }

void first_handler(int) {}
void second_handler(int) {}

// A runtime's use of faults: its handler makes the page it faulted on accessible and returns,
// and the access is made again.
char* g_own_page = nullptr;
void make_page_accessible(int, siginfo_t* info, void*) {
  const auto page = reinterpret_cast<std::uintptr_t>(g_own_page);
  const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
  if (at >= page && at < page + 4096) {
    say("program handler saw its own page\n");
    mprotect(g_own_page, 4096, PROT_READ | PROT_WRITE);
    return;
  }
  say("program handler saw another address\n");
  _exit(3);
}

int usage() {
  std::fprintf(stderr,
               "usage: report_child past|past_from_odd_frame|past_on_small_signal_stack|use_after_free|canary|own_handler_exits|own_handler_returns|"
               "signal_returns|own_fault|redirected_stderr FILE|library LIBRARY|pid_then_past\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string mode = argv[1];
  if (mode == "past") {
    char* p = allocate_buffer(4096);
    write_one_past_the_end(p, 4096);
    return 0;
  }
  if (mode == "past_from_odd_frame") {
    char* p = allocate_buffer(4096);
    report_child_write_with_odd_frame(p + 4096);
    return 0;
  }
  if (mode == "past_on_small_signal_stack") {
    // An 8 KiB alternate signal stack with an inaccessible page below it, as Rust gives every
    // thread: the report must not overflow it.
    constexpr std::size_t kSize = 8192;
    auto* base = static_cast<char*>(mmap(nullptr, kSize + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base == MAP_FAILED || mprotect(base, 4096, PROT_NONE) != 0) return 3;
    stack_t stack{};
    stack.ss_sp = base + 4096;
    stack.ss_size = kSize;
    if (sigaltstack(&stack, nullptr) != 0) return 3;
    char* p = allocate_buffer(4096);
    write_one_past_the_end(p, 4096);
    return 0;
  }
  if (mode == "pid_then_past") {
    std::printf("pid %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    char* p = allocate_buffer(4096);
    write_one_past_the_end(p, 4096);
    return 0;
  }
  if (mode == "use_after_free") {
    char* p = allocate_buffer(100);
    release_buffer(p);
    read_after_free(p);
    return 0;
  }
  if (mode == "canary") {
    char* p = allocate_buffer(4000);
    write_before_the_start(p);
    release_buffer(p);
    return 0;
  }
  if (mode == "own_handler_exits" || mode == "own_handler_returns") {
    // Installed after start-up, as Python's faulthandler or a test runner's would be.
    struct sigaction sa {};
    sa.sa_handler = mode == "own_handler_exits" ? exiting_handler : returning_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    char* p = allocate_buffer(4096);
    write_one_past_the_end(p, 4096);
    return 0;
  }
  if (mode == "signal_returns") {
    // What the program installed is what it reads back, as without the guard.
    const auto was = signal(SIGSEGV, first_handler);
    const auto then = signal(SIGSEGV, second_handler);
    struct sigaction now {};
    sigaction(SIGSEGV, nullptr, &now);
    const auto sysv = sysv_signal(SIGSEGV, SIG_DFL);
    const auto last = signal(SIGSEGV, SIG_DFL);
    std::printf("first signal() returned the default: %s\n", was == SIG_DFL ? "yes" : "no");
    std::printf("second signal() returned the first handler: %s\n", then == first_handler ? "yes" : "no");
    std::printf("sigaction() reads the second handler: %s\n", now.sa_handler == second_handler ? "yes" : "no");
    std::printf("sysv_signal() returned the second handler: %s\n", sysv == second_handler ? "yes" : "no");
    std::printf("signal() after sysv_signal() returned the default: %s\n", last == SIG_DFL ? "yes" : "no");
    std::fflush(stdout);
    // The guard is still the one that reports.
    char* p = allocate_buffer(4096);
    write_one_past_the_end(p, 4096);
    return 0;
  }
  if (mode == "own_fault") {
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return 3;
    g_own_page = static_cast<char*>(page);
    struct sigaction sa {};
    sa.sa_sigaction = make_page_accessible;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    g_own_page[100] = 7;  // faults once; the handler makes the page writable
    std::printf("resumed, the byte is %d\n", g_own_page[100]);
    return 0;
  }
  if (mode == "redirected_stderr" && argc == 3) {
    // As pytest's capture does: fd 2 becomes a file that nobody reads if the process dies.
    const int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0) return 3;
    close(fd);
    std::fprintf(stderr, "the program's own line on its redirected stderr\n");
    std::fflush(stderr);
    char* p = allocate_buffer(4096);
    write_one_past_the_end(p, 4096);
    return 0;
  }
  if (mode == "library" && argc == 3) {
    // A library built without debug information (report_nodebug_library.cpp).
    void* library = dlopen(argv[2], RTLD_NOW);
    if (library == nullptr) {
      std::fprintf(stderr, "%s\n", dlerror());
      return 3;
    }
    using Entry = void (*)(char*, std::size_t);
    auto entry = reinterpret_cast<Entry>(dlsym(library, "nodebug_entry"));
    if (entry == nullptr) return 3;
    char* p = allocate_buffer(4096);
    entry(p, 4096);
    return 0;
  }
  return usage();
}
