// libmate_guard_preload.so: the host allocation family, interposed with LD_PRELOAD by
// `mate guard-run`, served by the process-wide guarded allocator.
//
// Traps this file handles:
//  * bootstrap: the real allocator is reached through glibc's exported __libc_* entry points, so
//    no dlsym is needed before the first allocation; allocations made while the guard itself is
//    starting or working (config parsing, a device driver's loading), marked by a per-thread
//    "inside" flag, are served by the preload's own small heap (preload_arena.hpp), so the
//    guard's bookkeeping never starts glibc's allocator;
//  * pointers the guard does not own (allocated before the preload started, by the real
//    allocator during bootstrap, or unguarded fallbacks) go back to the real allocator, except
//    pointers into a guarded range, which get the guard's invalid-free report;
//  * fork: the allocator's locks are held across fork (pthread_atfork);
//  * threads: the allocator is thread-safe; the flag is thread-local (initial-exec TLS, valid in
//    a library loaded at start-up).
// Allocations below MATE_GUARD_MIN_BYTES and allocations the system refuses to map go to the
// real allocator (the latter counted as unguarded). Alignments above a page are guarded too (the
// allocator over-reserves and slides the mapping).
#include <dlfcn.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <malloc.h>

#include "mate/config.hpp"
#include "mate/core/crash_context.hpp"
#include "mate/guard/allocator.hpp"
#include "guard/preload/preload_arena.hpp"
#include "guard/preload/preload_state.hpp"
#include "guard/report_output.hpp"
#include "guard/stack/stack_capture.hpp"

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {

enum State : int { kUninit, kStarting, kReady, kOff };
std::atomic<int> g_state{kUninit};
std::atomic<bool> g_stopped{false};  // stop_guarding()
mate::guard::GuardAllocator* g_guard = nullptr;
std::size_t g_min_bytes = 0;
__attribute__((tls_model("initial-exec"))) thread_local bool t_inside = false;
// t_inside on the loading thread before the library's own initializers set it.
bool g_inside_before_initializers = false;
mate::guard::GuardAllocatorConfig g_config;

using mate::guard::preload::Inside;
namespace arena = mate::guard::preload;

void fork_prepare() {
  g_guard->prepare_fork();
  arena::arena_prepare_fork();
}
void fork_after() {
  arena::arena_after_fork();
  g_guard->after_fork();
}

// What the guard does not serve: the guard's own allocations go to its arena (when it can take
// them), everything else to the real allocator.
void* unguarded_malloc(std::size_t size) noexcept {
  if (t_inside)
    if (void* p = arena::arena_allocate(size, 0, false)) return p;
  return __libc_malloc(size);
}

// Reads one registry variable strictly, with the registry's allocation-free scalar rules (the
// full parser and its messages are for the error path only: every page of code run here is
// resident in the guarded program). A bad value ends the process with the registry's message;
// `mate guard-run` validated these variables before starting the program, so only a hand-set
// LD_PRELOAD gets here with one.
mate::config::Scalar read(mate::config::Var v) noexcept {
  const char* text = mate::config::raw_env_unsafe(v);
  mate::config::Scalar value = mate::config::parse_scalar(v, text == nullptr ? "" : text);
  if (value.ok) return value;
  try {
    (void)mate::config::parse(v, text == nullptr ? "" : text);
    std::fprintf(stderr, "mate guard-run: %s is not a scalar variable\n", mate::config::info(v).name.data());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mate guard-run: %s\n", e.what());
  }
  _exit(2);
}

// Reads a whole small /proc file into `buffer` with plain system calls (no allocation here);
// returns the bytes read, -1 when it cannot be opened. `on_chunk` sees each chunk read.
template <typename OnChunk>
long read_proc(const char* path, OnChunk on_chunk) noexcept {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char chunk[4096];
  long total = 0;
  for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) > 0;) {
    on_chunk(chunk, static_cast<std::size_t>(n));
    total += n;
  }
  ::close(fd);
  return total;
}

// The memory-map entries the process may have while the guard maps more
// (GuardAllocatorConfig::map_entry_limit): vm.max_map_count less a margin for the program's own
// later mappings (thread stacks, libraries, files), 1/32 of the limit and at least 1024. Without
// it the guard took every entry and a program past the limit could not start a thread. 0 (no
// limit) when vm.max_map_count cannot be read.
std::size_t map_entry_limit() noexcept {
  long limit = 0;
  if (read_proc("/proc/sys/vm/max_map_count", [&](const char* text, std::size_t n) {
        for (std::size_t i = 0; i < n && text[i] >= '0' && text[i] <= '9'; ++i) limit = limit * 10 + (text[i] - '0');
      }) <= 0 || limit <= 0)
    return 0;
  const long margin = limit / 32 > 1024 ? limit / 32 : 1024;
  return static_cast<std::size_t>(limit - margin > 64 ? limit - margin : 64);
}

void start() noexcept {
  int expected = kUninit;
  if (!g_state.compare_exchange_strong(expected, kStarting)) return;
  Inside inside;
  using mate::config::Var;
  if (!read(Var::MATE_GUARD_ALLOCATOR_AUTO_INSTALL).boolean) {
    g_state.store(kOff);
    return;
  }
  mate::guard::GuardAllocatorConfig config;
  if (read(Var::MATE_GUARD_ALLOCATOR_MODE).choice == "head") config.mode = mate::guard::Mode::Head;
  if (const mate::config::Scalar sync = read(Var::MATE_GUARD_ALLOCATOR_SYNC_ON_FREE); sync.set)
    config.sync_on_free = sync.boolean;
  config.log_allocations = read(Var::MATE_GUARD_ALLOCATOR_LOG_ALLOCATIONS).boolean;
  config.skip_frames = 2;  // guard_alloc and malloc/calloc/...
  config.backtraces = read(Var::MATE_GUARD_BACKTRACES).boolean;
  (void)read(Var::MATE_GUARD_SYMBOLIZE);  // read at report time, where a bad value cannot be said
  g_min_bytes = static_cast<std::size_t>(read(Var::MATE_GUARD_MIN_BYTES).integer);
  if (const mate::config::Scalar mb = read(Var::MATE_GUARD_QUARANTINE_MB); mb.set)  // else the backend's default
    config.quarantine_bytes = static_cast<std::size_t>(mb.integer) << 20;
  config.map_entry_limit = map_entry_limit();
  g_config = config;
  // Reports reach the stderr the program started with, whatever it does with fd 2 later (pytest's
  // capture), and a copy goes to the report file; the fault handler stays first for SIGSEGV and
  // SIGBUS whatever handlers the program installs (report_output.hpp, preload_signals.cpp).
  mate::guard::keep_program_stderr();
  if (!mate::guard::set_report_file(mate::config::raw_env_unsafe(Var::MATE_GUARD_REPORT_FILE))) {
    std::fprintf(stderr, "mate guard-run: MATE_GUARD_REPORT_FILE is longer than a path may be\n");
    _exit(2);
  }
  mate::guard::preload::resolve_signal_functions();
  try {
    g_guard = &mate::guard::install_guard_allocator(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mate guard-run: %s\n", e.what());
    _exit(2);
  }
  // The first walk fills the unwinders' caches (and allocates, where the C++ unwinder walks): do it
  // now, inside.
  if (config.backtraces) {
    void* frames[4];
    (void)mate::guard::capture_stack(frames, 4);
  }
  pthread_atfork(fork_prepare, fork_after, fork_after);
  // Make sure the real allocator can still grow once the guard has used up vm.max_map_count
  // (every guarded allocation costs memory-map entries): the allocations handed to it then need
  // glibc's heap, and the kernel lets the program break extend an existing [heap] mapping at the
  // limit but not create one. glibc creates its heap lazily, and the guard's own allocations no
  // longer do (preload_arena.hpp), so the break is moved by one untouched page here.
  (void)sbrk(static_cast<intptr_t>(sysconf(_SC_PAGESIZE)));
  g_state.store(kReady, std::memory_order_release);
}

// Called once the system has refused the guard a mapping (vm.max_map_count reached; a request
// merely too large is AllocError::NoMemory and does not get here): from then on the real
// allocator serves every new allocation (the guard said so once, with the remedy), and it is told
// to grow only its brk heap, which extends one existing mapping, from one arena, instead of
// mapping large blocks and per-thread arenas one by one: at the limit a new mapping fails, and a
// mapping that succeeds at exactly the limit would leave the heap unable to grow. Without this
// the program would see allocations fail soon after the guard's last one. Both settings stay for
// the rest of the run, and guarding does not resume (docs/guard-allocator.md).
void stop_guarding() noexcept {
  if (g_stopped.exchange(true)) return;
  mallopt(M_MMAP_MAX, 0);
  // One arena: a thread's first allocation would otherwise create its own arena, a new mapping.
  mallopt(M_ARENA_MAX, 1);
}

// After stop_guarding(), what would have been guarded is counted as unguarded (stats()).
void count_unguarded(std::size_t size) noexcept {
  if (g_stopped.load(std::memory_order_relaxed) && !t_inside && size >= g_min_bytes &&
      g_state.load(std::memory_order_acquire) == kReady) {
    Inside inside;
    g_guard->note_unguarded();
  }
}

// The guard serves this call when it is ready and the call is not the guard's own.
bool guarded() noexcept {
  int s = g_state.load(std::memory_order_acquire);
  if (s == kUninit && !t_inside) {
    start();
    s = g_state.load(std::memory_order_acquire);
  }
  return s == kReady && !t_inside && !g_stopped.load(std::memory_order_relaxed);
}

// Not inlined: backtraces leave out exactly this frame and the interposed entry point's.
__attribute__((noinline)) void* guard_alloc(std::size_t size, std::size_t alignment) noexcept {
  mate::guard::AllocResult r;
  {
    Inside inside;
    r = g_guard->allocate(size, alignment);
    if (!r && r.error == mate::guard::AllocError::TableFull) g_guard->note_unguarded();
    // Counted as unguarded by count_unguarded(), as every allocation after it is.
    if (!r && r.error == mate::guard::AllocError::MappingRefused) stop_guarding();
  }
  return r ? reinterpret_cast<void*>(r.ptr) : nullptr;
}

// Not inlined, like guard_alloc, so free backtraces skip the same two frames.
__attribute__((noinline)) void guard_free(void* p) noexcept {
  Inside inside;
  g_guard->deallocate(reinterpret_cast<std::uintptr_t>(p));
}

// True when the guard owns `p` (and so must free / size it).
bool owned(void* p) noexcept {
  if (p == nullptr || g_state.load(std::memory_order_acquire) != kReady) return false;
  Inside inside;
  return g_guard->owns(reinterpret_cast<std::uintptr_t>(p));
}

// True when `p`, not owned, still lies inside a range the guard reserved (p + 1 of a guarded
// buffer): glibc must never see it, it would read the guard's bytes as its chunk header.
bool in_guarded_range(void* p) noexcept {
  if (t_inside || g_state.load(std::memory_order_acquire) != kReady ||
      !g_guard->may_hold(reinterpret_cast<std::uintptr_t>(p)))
    return false;
  Inside inside;
  mate::guard::Description d = g_guard->describe(reinterpret_cast<std::uintptr_t>(p));
  return d.found && !d.outside;
}

// Inlined into each entry point, as allocate_path is (backtraces skip exactly two frames).
__attribute__((always_inline)) inline void* aligned(std::size_t alignment, std::size_t size) noexcept {
  if (guarded() && size >= g_min_bytes) {
    if (void* p = guard_alloc(size, alignment < 16 ? 16 : alignment)) return p;
  }
  if (t_inside)
    if (void* p = arena::arena_allocate(size, alignment, false)) return p;
  count_unguarded(size);
  return __libc_memalign(alignment, size);
}

bool power_of_two(std::size_t v) { return v != 0 && (v & (v - 1)) == 0; }

// memalign's reading of an alignment, glibc's: any value up to SIZE_MAX / 2 + 1, rounded up to
// a power of two (0 and the small ones are malloc's 16); false (EINVAL) above that.
bool memalign_alignment(std::size_t requested, std::size_t* out) noexcept {
  if (requested > SIZE_MAX / 2 + 1) return false;
  std::size_t a = 1;
  while (a < requested) a <<= 1;
  *out = a;
  return true;
}

// aligned_alloc took any alignment as memalign does until glibc 2.38, which refuses one that is
// no power of two (C17's reading): the guard answers as the C library in the process would.
bool aligned_alloc_is_strict() noexcept {
  static const bool strict = [] {
    unsigned major = 0, minor = 0;
    const char* v = gnu_get_libc_version();
    while (*v >= '0' && *v <= '9') major = major * 10 + static_cast<unsigned>(*v++ - '0');
    if (*v == '.') ++v;
    while (*v >= '0' && *v <= '9') minor = minor * 10 + static_cast<unsigned>(*v++ - '0');
    return major > 2 || (major == 2 && minor >= 38);
  }();
  return strict;
}

}  // namespace

namespace mate::guard::preload {

bool& inside_flag() noexcept { return t_inside; }

// Starts the guard at load time even if the program never allocates before main.
void start_guarding() noexcept {
  t_inside = g_inside_before_initializers;
  (void)guarded();
}

const GuardAllocatorConfig* bootstrap_config() noexcept {
  return g_state.load(std::memory_order_acquire) == kReady ? &g_config : nullptr;
}

}  // namespace mate::guard::preload

#define MATE_EXPORT extern "C" __attribute__((visibility("default")))

// Crash-context providers of the guarded program's own copy of MATE (API logging's call in
// flight): mate::core::register_crash_context hands them to this library's table too, which the
// reports written here read (mate/core/crash_context.hpp).
MATE_EXPORT int mate_guard_preload_register_crash_context(mate::core::CrashContextProvider provider) noexcept {
  return mate::core::register_crash_context_here(provider) ? 1 : 0;
}

namespace {

// The bodies of malloc and free, inlined into each entry point (malloc, realloc) so that
// guard_alloc and guard_free are called from the entry point's own frame: backtraces skip
// exactly those two frames (config.skip_frames), and the first one shown is the caller's.
__attribute__((always_inline)) inline void* allocate_path(std::size_t size) noexcept {
  if (guarded() && size >= g_min_bytes) {
    if (void* p = guard_alloc(size, 0)) return p;
  }
  count_unguarded(size);
  return unguarded_malloc(size);
}

__attribute__((always_inline)) inline void free_path(void* p) noexcept {
  if (p == nullptr) return;
  if (arena::arena_owns(p)) {
    arena::arena_free(p);
    return;
  }
  if (!t_inside && owned(p)) {
    guard_free(p);
    asm volatile("" ::: "memory");  // no tail call: backtraces skip exactly free's frame
    return;
  }
  if (in_guarded_range(p)) {
    // Not a pointer the guard returned (free(p + 1)): the guard's invalid-free report, not
    // glibc's guess from the bytes before it.
    guard_free(p);
    asm volatile("" ::: "memory");
    return;
  }
  __libc_free(p);
}

}  // namespace

MATE_EXPORT void* malloc(size_t size) noexcept { return allocate_path(size); }

MATE_EXPORT void free(void* p) noexcept { free_path(p); }

MATE_EXPORT void* calloc(size_t n, size_t size) noexcept {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  // Guarded memory is freshly mapped, hence already zero.
  if (guarded() && total >= g_min_bytes) {
    if (void* p = guard_alloc(total, 0)) return p;
  }
  if (t_inside)
    if (void* p = arena::arena_allocate(total, 0, true)) return p;
  count_unguarded(total);
  return __libc_calloc(n, size);
}

MATE_EXPORT void* realloc(void* p, size_t size) noexcept {
  if (p == nullptr) return allocate_path(size);
  if (arena::arena_owns(p)) {
    // Moves out of the arena when a thread outside the guard grows the block: the guard then
    // serves it like any other allocation.
    if (size == 0) {
      arena::arena_free(p);
      return nullptr;
    }
    std::size_t old = arena::arena_usable_size(p);
    void* q = allocate_path(size);
    if (q == nullptr) return nullptr;
    std::memcpy(q, p, old < size ? old : size);
    arena::arena_free(p);
    return q;
  }
  if (!t_inside && owned(p)) {
    if (size == 0) {
      free_path(p);
      return nullptr;
    }
    std::size_t old = g_guard->size_of(reinterpret_cast<std::uintptr_t>(p));
    void* q = allocate_path(size);
    if (q == nullptr) return nullptr;
    std::memcpy(q, p, old < size ? old : size);
    free_path(p);
    return q;
  }
  if (in_guarded_range(p)) {
    // realloc(p + 1): the same invalid-free report as free(p + 1), which aborts; were the run
    // to continue (on_corruption=continue), realloc fails and the buffer stays as it was.
    guard_free(p);
    errno = EINVAL;
    return nullptr;
  }
  return __libc_realloc(p, size);
}

MATE_EXPORT int posix_memalign(void** out, size_t alignment, size_t size) noexcept {
  if (!power_of_two(alignment) || alignment % sizeof(void*) != 0) return EINVAL;
  void* p = aligned(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

MATE_EXPORT void* aligned_alloc(size_t alignment, size_t size) noexcept {
  std::size_t a = 0;
  if ((aligned_alloc_is_strict() && !power_of_two(alignment)) || !memalign_alignment(alignment, &a)) {
    errno = EINVAL;
    return nullptr;
  }
  return aligned(a, size);
}

MATE_EXPORT void* memalign(size_t alignment, size_t size) noexcept {
  std::size_t a = 0;
  if (!memalign_alignment(alignment, &a)) {
    errno = EINVAL;
    return nullptr;
  }
  return aligned(a, size);
}

MATE_EXPORT void* valloc(size_t size) noexcept { return aligned(static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), size); }

MATE_EXPORT void* pvalloc(size_t size) noexcept {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::size_t rounded = 0;
  if (__builtin_add_overflow(size, page - 1, &rounded)) {  // as glibc: no wrap to a tiny size
    errno = ENOMEM;
    return nullptr;
  }
  return aligned(page, rounded / page * page);
}

MATE_EXPORT size_t malloc_usable_size(void* p) noexcept {
  if (p == nullptr) return 0;
  if (arena::arena_owns(p)) return arena::arena_usable_size(p);
  // The exact size, so programs that trust the usable size still stop at the guard.
  if (!t_inside && owned(p)) return g_guard->size_of(reinterpret_cast<std::uintptr_t>(p));
  if (in_guarded_range(p)) {
    // p + 1 of a guarded buffer: glibc would read canary bytes as a chunk header.
    Inside inside;
    g_guard->report_invalid_pointer(reinterpret_cast<std::uintptr_t>(p), "malloc_usable_size");
    return 0;
  }
  using Fn = size_t (*)(void*);
  static Fn real = [] {
    Inside inside;
    return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "malloc_usable_size"));
  }();
  return real != nullptr ? real(p) : 0;
}

// The library's initializers run on the loading thread, in .init_array order: this one first
// (a priority runs before the others), start_guarding (preload_start.cpp) last. Until then every
// allocation is the library's own (its C++ runtime's emergency exception pool): inside, so the
// arena serves it and the guard does not start for it.
__attribute__((constructor(101))) static void mate_guard_preload_own_initializers() {
  g_inside_before_initializers = t_inside;
  t_inside = true;
}
