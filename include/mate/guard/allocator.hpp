// mate/guard/allocator.hpp — the guarded allocator: every allocation in its own mapping, one
// side against an unmapped guard region, the other side filled with canary bytes.
//
// The allocator core works on any mate::device::Backend (host memory through mmap/mprotect,
// CUDA/MUSA device memory through the driver's virtual-memory API), so host and device share
// placement, canaries, quarantine, lookup and reports. See docs/guard-allocator.md.
//
// Placement (G = backend granularity, A = alignment, n = size, R = n rounded up to min(A, G),
// D = R rounded up to G): each allocation reserves [guard G][mapping D][guard G].
//  * tail mode: the user pointer is mapping_end - R, so R ends exactly at the trailing guard;
//    the bytes before the pointer and between n and R are canary.
//  * head mode: the user pointer is the mapping's start, right after the leading guard; the
//    bytes after n are canary and the trailing guard catches large overruns.
//  * n == 0: a unique pointer into a reservation that is never mapped (any access faults).
//  * A > G: the reservation grows by A - G and the mapping slides (staying G-aligned) until its
//    start, the user pointer in both modes, is a multiple of A; the unmapped slack widens the
//    leading guard. The padding stays below G (R = n rounded up to G): padding to A would make
//    up to A bytes resident canary for nothing.
// Freed ranges are unmapped and stay reserved in a FIFO quarantine bounded by an address-space
// budget, so stale pointers fault as use-after-free.
//
// Contract:
//  * allocate()/deallocate() never throw and never call malloc: metadata lives in mmap'd
//    tables of fixed capacity, so the allocator can serve a malloc interposer.
//  * Thread-safe. Reports go to stderr (fd 2) with write(2).
//  * A guard or quarantine fault (SIGSEGV/SIGBUS) is reported by a handler chained to the
//    previous one (install_fault_handler()); the process then dies of the original signal.
//  * install_guard_allocator() creates the process-wide allocator; it throws GuardError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "mate/device/backend.hpp"

namespace mate::guard {

enum class Mode : std::uint8_t { Tail, Head };
// Which share of the map-entry budget an allocation may use (GuardAllocatorConfig's
// map_entry_limit and low_priority_entry_limit): Low for the small blocks an interpreter makes
// by the million, Normal for everything else (tensors, aligned and large blocks).
enum class Priority : std::uint8_t { Normal, Low };
enum class OnCorruption : std::uint8_t { Abort, Continue };

const char* to_string(Mode mode) noexcept;
const char* to_string(OnCorruption action) noexcept;

// GuardAllocatorConfig::quarantine_bytes left to the backend's default.
inline constexpr std::size_t kQuarantineForBackend = SIZE_MAX;
// The quarantine's default address-space budget: 64 MiB for host memory (thousands of small
// allocations of two or three pages); 64 GiB for device memory, whose granules are 2 MiB on
// current GPUs, so that a small tensor reserves 6 MiB and 64 MiB would keep only about ten freed
// tensors. Device address space is plentiful and a quarantined range holds no physical memory.
std::size_t default_quarantine_bytes(device::Kind kind) noexcept;

struct GuardAllocatorConfig {
  // Placement: which side of the allocation faults at the first invalid access (see the top).
  Mode mode = Mode::Tail;
  // Checks and diagnostics.
  bool sync_on_free = true;      // backend.synchronize() before checking canaries at free
  bool log_allocations = false;  // one line per alloc/free on stderr
  bool backtraces = true;        // capture allocation and free backtraces for reports
  // Address space kept reserved for freed allocations before the oldest is released;
  // kQuarantineForBackend: default_quarantine_bytes(backend).
  std::size_t quarantine_bytes = kQuarantineForBackend;
  // What happens after a canary, double-free or invalid-free report.
  OnCorruption on_corruption = OnCorruption::Abort;
  // Which memory: Host (mmap) or a device driver (process-wide driver backend).
  device::Kind backend = device::Kind::Host;
  // Most allocations tracked at once (live + quarantined); sizes the mmap'd slot table.
  std::size_t max_allocations = std::size_t{1} << 20;
  // Frames of the caller's own wrappers (e.g. an interposed malloc) left out of backtraces.
  int skip_frames = 0;
  // Host memory only. The most memory-map entries (the unit of vm.max_map_count) the process
  // may have for the allocator to map one more allocation. The allocator keeps upper estimates
  // (MapEntryBudget, src/guard/platform/map_entry_budget.hpp) and counts the process's entries
  // (/proc/self/maps) when they would pass the limit: neighbouring guard pages and quarantined
  // ranges share entries, so a program gets ~2 entries per live allocation, not 3.
  // At the limit the oldest quarantined ranges are given back (half at a time, while that frees
  // entries), then allocations are refused as when the system refuses a mapping. 0: no limit.
  // mate guard-run sets vm.max_map_count less a reserve for the program's own threads,
  // libraries and files (MATE_GUARD_MAP_RESERVE).
  std::size_t map_entry_limit = 0;
  // The lower limit for Priority::Low allocations (an interpreter's small blocks): once the
  // process has this many entries they are refused (AllocError::OverBudget) while normal ones
  // still get the rest up to map_entry_limit. 0: the same as map_entry_limit.
  std::size_t low_priority_entry_limit = 0;
  // A descriptor the allocator writes one line to for each canary found corrupted at free
  // ("canary before|after OFFSET id ID size SIZE\n"), before the report's abort: how
  // `mate guard-run --mode auto` learns what its tail-mode run found. -1: none.
  int outcome_fd = -1;

  bool operator==(const GuardAllocatorConfig&) const = default;
};

// "mode=tail sync_on_free=1 log_allocations=0 ..." for messages.
std::string describe(const GuardAllocatorConfig& config);

class GuardError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class AllocError : std::uint8_t {
  None,
  BadAlignment,    // not a power of two
  TooLarge,        // size overflows the placement arithmetic
  NoMemory,        // this allocation cannot be reserved or mapped, though a small one still can
                   // (a huge size, device memory full): nothing is said, the quarantine is kept
  MappingRefused,  // the system refuses any new mapping (vm.max_map_count; said once, with the remedy)
  OverBudget,      // the map-entry budget (map_entry_limit) has no room for this allocation's
                   // priority now; later ones may fit again as guarded allocations are freed
  TableFull,       // max_allocations reached
  Capturing,       // the stream is being captured into a graph
  BackendError,
};

struct AllocResult {
  std::uintptr_t ptr = 0;
  AllocError error = AllocError::None;
  const char* message = nullptr;  // static text when error != None
  explicit operator bool() const noexcept { return error == AllocError::None; }
};

// CanaryNotChecked: freed, but the canary could not be read back (e.g. the device context has a
// sticky error), so it is not known intact; reported as "canary not checked: <status>".
enum class FreeResult : std::uint8_t { Ok, CanaryCorrupted, DoubleFree, InvalidFree, Capturing, CanaryNotChecked };

struct Stats {
  std::uint64_t allocations = 0;  // served, guarded
  std::uint64_t frees = 0;
  std::uint64_t live = 0;
  std::uint64_t live_bytes = 0;         // user bytes
  std::uint64_t quarantined = 0;
  std::uint64_t quarantined_bytes = 0;  // reserved address space
  // Freed allocations released at once: no quarantine record could describe them (an address
  // above 2^48, an alignment above 2^25 granules) or be stored (no memory for the ring).
  std::uint64_t not_quarantined = 0;
  std::uint64_t unguarded = 0;          // fallbacks counted by note_unguarded()
  std::uint64_t canary_failures = 0;
  std::uint64_t canary_unchecked = 0;  // checks whose canary read failed (not known intact)
  std::uint64_t double_frees = 0;
  std::uint64_t invalid_frees = 0;
};

enum class State : std::uint8_t { None, Live, Quarantined };
// Where an address lies relative to an allocation.
enum class Relation : std::uint8_t {
  Inside,       // within [user, user + size)
  BeforeStart,  // underrun: offset = bytes before the start (>= 1)
  PastEnd,      // overflow: offset = bytes past the end (0 = the first byte after it)
};

struct Description {
  bool found = false;
  std::uint64_t id = 0;
  std::uintptr_t user = 0;
  std::size_t size = 0;
  std::uintptr_t reservation = 0;  // [reservation, reservation + reserved)
  std::size_t reserved = 0;
  std::uintptr_t mapping = 0;  // [mapping, mapping + mapped): the accessible part while live
  std::size_t mapped = 0;
  Mode mode = Mode::Tail;
  State state = State::None;
  Relation relation = Relation::Inside;
  std::size_t offset = 0;  // see Relation
  bool outside = false;     // beyond the reservation (a wild address within a granule of it)
};

class SlotTable;
struct PatternImage;
struct CanaryRanges;
struct Slot;
class MapEntryBudget;

class GuardAllocator {
 public:
  // Uses `backend` for memory (not owned; must outlive the allocator). Throws GuardError when
  // the metadata tables cannot be mapped.
  GuardAllocator(device::Backend& backend, const GuardAllocatorConfig& config);
  ~GuardAllocator();
  GuardAllocator(const GuardAllocator&) = delete;
  GuardAllocator& operator=(const GuardAllocator&) = delete;

  // alignment 0 = the backend's default (16 host, 256 device); any power of two is accepted. `stream` is checked for graph
  // capture (nullptr: the legacy stream).
  // `priority` picks the map-entry limit that applies (config.low_priority_entry_limit).
  AllocResult allocate(std::size_t size, std::size_t alignment = 0, void* stream = nullptr,
                       Priority priority = Priority::Normal) noexcept;
  // Frees a pointer from allocate(). Canary corruption, double and invalid frees are reported
  // and then abort unless config.on_corruption is Continue.
  FreeResult deallocate(std::uintptr_t ptr, void* stream = nullptr) noexcept;
  // True when `ptr` is a user pointer this allocator returned (live or quarantined).
  bool owns(std::uintptr_t ptr) const noexcept;
  // False when `address` is outside every range this allocator ever reserved (a cheap test
  // before describe(), which scans the table).
  bool may_hold(std::uintptr_t address) const noexcept;
  // Size of the live allocation at `ptr` (0 when not a live user pointer).
  std::size_t size_of(std::uintptr_t ptr) const noexcept;
  // Checks the canaries of every live allocation, reports each corruption and each canary it
  // could not read; returns the count of allocations not known intact (corrupted or not checked).
  std::size_t check_all() noexcept;
  // Which allocation `address` belongs to or is nearest (live or quarantined). Takes the lock,
  // so other threads may allocate and free meanwhile; not for a signal handler.
  Description describe(std::uintptr_t address) const noexcept;
  // Reports `ptr`, handed to `operation` (e.g. "malloc_usable_size") though it is not a pointer
  // this allocator returned, as an invalid free is reported; stops the process unless
  // config.on_corruption is Continue.
  void report_invalid_pointer(std::uintptr_t ptr, const char* operation) noexcept;
  // Counts an allocation the caller served elsewhere because this allocator could not.
  void note_unguarded() noexcept;
  Stats stats() const noexcept;
  // Holds the allocator's locks across fork() (pthread_atfork prepare / parent / child), so the
  // child never inherits a lock held by a thread that does not exist there.
  void prepare_fork() noexcept;
  void after_fork() noexcept;

  const GuardAllocatorConfig& config() const noexcept { return config_; }
  device::Backend& backend() const noexcept { return backend_; }

 private:
  struct Placement;  // where an allocation's reservation, mapping and user pointer go (allocator.cpp)
  AllocResult reserve_and_map(const Placement& p, std::uintptr_t* base) noexcept;
  AllocResult write_canaries(const Placement& p, std::uintptr_t base, std::uintptr_t user, std::size_t size) noexcept;
  // Device memory only (device_canary.cpp).
  device::Status write_device_canaries(const CanaryRanges& ranges) noexcept;
  const PatternImage* pattern_image_locked() noexcept;
  void free_pattern_image() noexcept;
  AllocResult record_live(const Placement& p, std::uintptr_t base, std::uintptr_t user, std::size_t size,
                          void* const* frames, int frame_count, std::uint64_t* id) noexcept;
  void log_allocation(const Placement& p, std::uintptr_t base, std::uintptr_t user, std::size_t size,
                      std::uint64_t id) noexcept;
  bool small_mapping_possible() noexcept;
  bool evict_oldest_locked() noexcept;
  void say_mapping_refused(const device::Status* status) noexcept;
  // Once: small blocks (Priority::Low) have used their share of the map entries.
  void say_low_priority_share_used() noexcept;
  FreeResult report_double_free(std::uintptr_t ptr, const Slot& freed, void* const* frames, int frame_count) noexcept;
  void report_invalid_pointer(std::uintptr_t ptr, const char* operation, void* const* frames,
                              int frame_count) noexcept;

  device::Backend& backend_;
  GuardAllocatorConfig config_;
  std::size_t quarantine_limit_;  // config_.quarantine_bytes, the backend's default resolved
  SlotTable* table_;
  // config_.map_entry_limit's bookkeeping (src/guard/platform); null when there is no limit.
  MapEntryBudget* map_budget_ = nullptr;
};

// Writes describe(address)'s answer as one line to `fd` (async-signal-safe).
void write_description(int fd, const Description& d, const char* backend_name) noexcept;

// ---- The process-wide allocator ----

// Installs the process-wide guarded allocator for config.backend. Repeated installs with the
// same config return the same allocator; a different config throws GuardError naming both.
// Throws "Guard allocator must be installed before the first <host|CUDA|MUSA> allocation in the
// process" when note_backend_allocation() was called for that backend before, and GuardError
// when the device backend is unavailable (with the reason).
GuardAllocator& install_guard_allocator(const GuardAllocatorConfig& config = {});
// Installs the guard's crash handler once per process (later calls do nothing): a SIGSEGV/SIGBUS
// in a guard region or a quarantined range of any GuardAllocator becomes a report, then the
// process dies of the original signal; other faults go to the previous handler.
// install_guard_allocator() calls it (and so the preload, the pluggable hooks and `mate replay
// --guard-alloc`, which install through it); a GuardAllocator constructed directly does not, so
// whoever constructs one and wants its faults reported calls this.
void install_fault_handler() noexcept;
// The installed allocator for `kind`, or nullptr.
GuardAllocator* installed_guard_allocator(device::Kind kind = device::Kind::Host) noexcept;
// Device ordinals device_guard_allocator() serves: 0 to kMaxGuardedDevices - 1 (the fault
// handler searches at most 16 allocators, the host's included).
inline constexpr int kMaxGuardedDevices = 8;
// The guarded allocator for device `ordinal` of the driver config.backend names (Cuda or Musa),
// for entry points that allocate on a given or the current device (the preload's cudaMalloc
// family, the pluggable hooks): ordinal 0's is the process-wide one (install_guard_allocator);
// every other ordinal gets its own on its own driver backend (that device's primary context),
// made with `config` on its first call and kept for the life of the process. nullptr with
// *error (on every call) when there is none: no driver, an ordinal the driver does not have.
GuardAllocator* device_guard_allocator(int ordinal, const GuardAllocatorConfig& config, std::string* error);
// Among the allocators device_guard_allocator() made for `kind`, the one that owns `address`.
GuardAllocator* device_guard_owning(device::Kind kind, std::uintptr_t address) noexcept;
// The allocators device_guard_allocator() made for `kind`, by ordinal (device 0's, when made,
// is installed_guard_allocator(kind)).
std::vector<GuardAllocator*> device_guard_allocators(device::Kind kind);
// Records that MATE served an unguarded allocation of `kind` (e.g. a framework hook that ran
// before any install), so a later install is refused as the seed says.
void note_backend_allocation(device::Kind kind) noexcept;

// describe() over every guarded allocator in the process (host and device). Takes each one's
// lock in turn: not while holding one (a Backend's own code), not in a signal handler.
Description describe(std::uintptr_t address) noexcept;

}  // namespace mate::guard
