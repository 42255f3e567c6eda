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
// The map-entry policy (docs/guard-allocator.md, "The map-entry budget under mate guard-run"): the guard maps up to
// vm.max_map_count less a reserve for the program's own mappings (MATE_GUARD_MAP_RESERVE), and
// malloc/calloc/realloc blocks below MATE_GUARD_SMALL_BYTES (an interpreter's, by the million)
// only up to MATE_GUARD_SMALL_SHARE percent of that, so the rest stays for tensors, aligned and
// large allocations. Each allocation not guarded is counted by reason (--summary).
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
// True while this thread runs the host guard's own code (HostGuardCall), where it may hold the
// guard's table lock. Narrower than t_inside, which also covers MATE calling foreign code (the
// device guard's set-up runs the driver): a pointer the host guard owns that reaches free or
// realloc from there is still the guard's to free (the driver reallocates blocks it allocated
// before), and asking the guard about it cannot deadlock.
__attribute__((tls_model("initial-exec"))) thread_local bool t_host_guard = false;
// t_inside on the loading thread before the library's own initializers set it.
bool g_inside_before_initializers = false;
mate::guard::GuardAllocatorConfig g_config;
// Policy knobs (start()): blocks below g_small_bytes from malloc/calloc/realloc are
// Priority::Low; g_align is their alignment (0: the allocator's default, max_align_t's).
std::size_t g_small_bytes = 4096;
std::size_t g_align = 0;
bool g_summary = false;
pid_t g_started_pid = 0;

// What the guard served, and why it did not serve the rest, for the summary at exit.
enum Unguarded : int { kBelowMinBytes, kSmallWhileShort, kWhileShort, kAfterRefusal, kTableFull, kTooLarge, kReasons };
constexpr const char* kReasonText[kReasons] = {
    "below MATE_GUARD_MIN_BYTES",
    "small blocks while memory map entries were short",
    "while memory map entries were short",
    "after the system refused a mapping",
    "with the allocation table full",
    "too large or no memory to guard them",
};
std::atomic<std::uint64_t> g_guarded_count{0};
std::atomic<std::uint64_t> g_guarded_bytes{0};
std::atomic<std::uint64_t> g_unguarded[kReasons];

void count_reason(Unguarded why) noexcept { g_unguarded[why].fetch_add(1, std::memory_order_relaxed); }

using mate::guard::preload::Inside;
namespace arena = mate::guard::preload;

// A call into the host guard: inside (its allocations are its own) and marked as the guard's.
struct HostGuardCall {
  HostGuardCall() noexcept : was_(t_host_guard) { t_host_guard = true; }
  ~HostGuardCall() { t_host_guard = was_; }
  HostGuardCall(const HostGuardCall&) = delete;
  HostGuardCall& operator=(const HostGuardCall&) = delete;

 private:
  Inside inside_;
  bool was_;
};

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
// (GuardAllocatorConfig::map_entry_limit): vm.max_map_count less a reserve for the program's own
// later mappings (thread stacks, libraries it opens, files it maps): `reserve` entries, or when
// negative (unset) 1/8 of the limit and at least 4096, so that `import torch` (a few thousand
// entries of libraries) still loads once the guard has used its share. 0 (no limit) when
// vm.max_map_count cannot be read.
std::size_t map_entry_limit(long reserve) noexcept {
  long limit = 0;
  if (read_proc("/proc/sys/vm/max_map_count", [&](const char* text, std::size_t n) {
        for (std::size_t i = 0; i < n && text[i] >= '0' && text[i] <= '9'; ++i) limit = limit * 10 + (text[i] - '0');
      }) <= 0 || limit <= 0)
    return 0;
  if (reserve < 0) reserve = limit / 8 > 4096 ? limit / 8 : 4096;
  return static_cast<std::size_t>(limit - reserve > 64 ? limit - reserve : 64);
}

// `mate guard-run --summary`: one line at exit, from the process guard-run started (not from a
// forked child that exits through exit()).
[[gnu::cold]] void write_summary() noexcept {
  if (!g_summary || g_started_pid != getpid()) return;
  std::uint64_t unguarded = 0;
  for (auto& n : g_unguarded) unguarded += n.load(std::memory_order_relaxed);
  const std::uint64_t bytes = g_guarded_bytes.load(std::memory_order_relaxed);
  char line[1024];
  int used = std::snprintf(line, sizeof line, "mate guard: summary: guarded %llu allocations (%llu.%llu MiB), %llu not guarded",
                           static_cast<unsigned long long>(g_guarded_count.load(std::memory_order_relaxed)),
                           static_cast<unsigned long long>(bytes >> 20),
                           static_cast<unsigned long long>((bytes & ((1u << 20) - 1)) * 10 >> 20),
                           static_cast<unsigned long long>(unguarded));
  const char* sep = " (";
  for (int why = 0; why < kReasons && used > 0 && used < static_cast<int>(sizeof line); ++why) {
    const std::uint64_t n = g_unguarded[why].load(std::memory_order_relaxed);
    if (n == 0) continue;
    used += std::snprintf(line + used, sizeof line - static_cast<std::size_t>(used), "%s%llu %s", sep,
                          static_cast<unsigned long long>(n), kReasonText[why]);
    sep = ", ";
  }
  if (used > 0 && used < static_cast<int>(sizeof line) - 2) {
    if (unguarded != 0) line[used++] = ')';
    line[used++] = '\n';
    for (int off = 0; off < used;) {
      const ssize_t w = ::write(STDERR_FILENO, line + off, static_cast<std::size_t>(used - off));
      if (w <= 0) break;
      off += static_cast<int>(w);
    }
  }
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
  const mate::config::Scalar reserve = read(Var::MATE_GUARD_MAP_RESERVE);
  config.map_entry_limit = map_entry_limit(reserve.set ? static_cast<long>(reserve.integer) : -1);
  const std::int64_t share = read(Var::MATE_GUARD_SMALL_SHARE).integer;
  config.low_priority_entry_limit = config.map_entry_limit / 100 * static_cast<std::size_t>(share);
  if (config.map_entry_limit != 0 && config.low_priority_entry_limit == 0) config.low_priority_entry_limit = 1;  // share 0: none
  g_small_bytes = static_cast<std::size_t>(read(Var::MATE_GUARD_SMALL_BYTES).integer);
  if (const mate::config::Scalar align = read(Var::MATE_GUARD_ALLOCATOR_ALIGN); align.set)
    g_align = static_cast<std::size_t>(align.integer);
  g_summary = read(Var::MATE_GUARD_ALLOCATOR_SUMMARY).boolean;
  if (const mate::config::Scalar fd = read(Var::MATE_GUARD_ALLOCATOR_OUTCOME_FD); fd.set)
    config.outcome_fd = static_cast<int>(fd.integer);
  g_started_pid = getpid();
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

// What the guard did not serve, by reason: below MATE_GUARD_MIN_BYTES, or after
// stop_guarding() (also counted in stats()); guard_alloc() counts its own refusals.
void count_unguarded(std::size_t size) noexcept {
  if (t_inside || g_state.load(std::memory_order_acquire) != kReady) return;
  if (size < g_min_bytes) {
    count_reason(kBelowMinBytes);
  } else if (g_stopped.load(std::memory_order_relaxed)) {
    count_reason(kAfterRefusal);
    HostGuardCall call;
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

// The alignment of a guarded malloc/calloc/realloc block: the default (0, max_align_t's), or
// under --align N below 16: N for a block of odd size, which no type larger than a byte fills,
// so it ends exactly at the guard; at least 8 for one of even size (16 for a multiple of 16), so
// that an object or array of any type but long double and vectors stays aligned for its type
// (CPython keeps flags in the low bits of its collected objects' pointers, and its code objects
// have sizes that are only multiples of 2; it still needs --align 2 or more to start).
std::size_t malloc_alignment(std::size_t size) noexcept {
  if (g_align == 0 || g_align >= 16) return g_align;
  if (size % 2 == 1) return g_align;
  const std::size_t natural = size % 16 == 0 ? 16 : 8;
  return natural > g_align ? natural : g_align;
}

// Not inlined: backtraces leave out exactly this frame and the interposed entry point's.
// `small`: a malloc/calloc/realloc block below MATE_GUARD_SMALL_BYTES (Priority::Low).
__attribute__((noinline)) void* guard_alloc(std::size_t size, std::size_t alignment, bool small) noexcept {
  using mate::guard::AllocError;
  mate::guard::AllocResult r;
  {
    HostGuardCall call;
    r = g_guard->allocate(size, alignment, nullptr, small ? mate::guard::Priority::Low : mate::guard::Priority::Normal);
    if (r) {
      g_guarded_count.fetch_add(1, std::memory_order_relaxed);
      g_guarded_bytes.fetch_add(size, std::memory_order_relaxed);
    } else if (r.error == AllocError::OverBudget) {
      count_reason(small ? kSmallWhileShort : kWhileShort);
    } else if (r.error == AllocError::TableFull) {
      count_reason(kTableFull);
      g_guard->note_unguarded();
    } else if (r.error == AllocError::MappingRefused) {
      // Counted by count_unguarded(), as every allocation after it is.
      stop_guarding();
    } else {
      count_reason(kTooLarge);
    }
  }
  return r ? reinterpret_cast<void*>(r.ptr) : nullptr;
}

// Not inlined, like guard_alloc, so free backtraces skip the same two frames.
__attribute__((noinline)) void guard_free(void* p) noexcept {
  HostGuardCall call;
  g_guard->deallocate(reinterpret_cast<std::uintptr_t>(p));
}

// True when the guard owns `p` (and so must free / size it).
bool owned(void* p) noexcept {
  if (p == nullptr || g_state.load(std::memory_order_acquire) != kReady) return false;
  HostGuardCall call;
  return g_guard->owns(reinterpret_cast<std::uintptr_t>(p));
}

// True when `p`, not owned, still lies inside a range the guard reserved (p + 1 of a guarded
// buffer): glibc must never see it, it would read the guard's bytes as its chunk header.
bool in_guarded_range(void* p) noexcept {
  if (t_host_guard || g_state.load(std::memory_order_acquire) != kReady ||
      !g_guard->may_hold(reinterpret_cast<std::uintptr_t>(p)))
    return false;
  HostGuardCall call;
  mate::guard::Description d = g_guard->describe(reinterpret_cast<std::uintptr_t>(p));
  return d.found && !d.outside;
}

// Inlined into each entry point, as allocate_path is (backtraces skip exactly two frames).
__attribute__((always_inline)) inline void* aligned(std::size_t alignment, std::size_t size) noexcept {
  if (guarded() && size >= g_min_bytes) {
    if (void* p = guard_alloc(size, alignment < 16 ? 16 : alignment, false)) return p;
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
    if (void* p = guard_alloc(size, malloc_alignment(size), size < g_small_bytes)) return p;
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
  if (!t_host_guard && owned(p)) {
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
    if (void* p = guard_alloc(total, malloc_alignment(total), total < g_small_bytes)) return p;
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
  if (!t_host_guard && owned(p)) {
    if (size == 0) {
      free_path(p);
      return nullptr;
    }
    std::size_t old;
    {
      HostGuardCall call;
      old = g_guard->size_of(reinterpret_cast<std::uintptr_t>(p));
    }
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
  if (!t_host_guard && owned(p)) {
    HostGuardCall call;
    return g_guard->size_of(reinterpret_cast<std::uintptr_t>(p));
  }
  if (in_guarded_range(p)) {
    // p + 1 of a guarded buffer: glibc would read canary bytes as a chunk header.
    HostGuardCall call;
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

// The preload is the first library loaded, so its finalizer runs last at exit: the summary
// counts everything the program allocated.
__attribute__((destructor)) static void mate_guard_preload_summary() { write_summary(); }
