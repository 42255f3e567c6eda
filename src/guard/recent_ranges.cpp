// A fixed ring under a mutex: written from the log's call path, read when a fault is reported.
#include "mate/guard/recent_ranges.hpp"

#include <atomic>
#include <mutex>

#include "mate/guard/allocator.hpp"
#include "report.hpp"

namespace mate::guard {

namespace {

struct RecentRange {
  char call[48];
  std::uint64_t seq;
  std::uintptr_t lo;
  std::uintptr_t hi;
};

std::mutex g_mutex;
RecentRange g_ring[kRecentRanges];
std::size_t g_count = 0;  // ranges ever recorded; the newest is at (g_count - 1) % kRecentRanges

}  // namespace

void note_device_range(const char* call, std::uint64_t seq, std::uintptr_t lo, std::uintptr_t hi) noexcept {
  if (hi <= lo) return;
  std::lock_guard lock(g_mutex);
  RecentRange& r = g_ring[g_count % kRecentRanges];
  std::size_t n = 0;
  for (; call != nullptr && call[n] != '\0' && n + 1 < sizeof(r.call); ++n) r.call[n] = call[n];
  r.call[n] = '\0';
  r.seq = seq;
  r.lo = lo;
  r.hi = hi;
  ++g_count;
}

void clear_recent_ranges() noexcept {
  std::lock_guard lock(g_mutex);
  g_count = 0;
}

std::size_t write_recent_ranges(int fd) noexcept {
  RecentRange copy[kRecentRanges];
  std::size_t n;
  {
    std::lock_guard lock(g_mutex);
    n = g_count < kRecentRanges ? g_count : kRecentRanges;
    for (std::size_t i = 0; i < n; ++i) copy[i] = g_ring[(g_count - 1 - i) % kRecentRanges];
  }
  for (std::size_t i = 0; i < n; ++i) {
    const RecentRange& r = copy[i];
    {
      ReportWriter w(fd);
      w.str("  call #").dec(r.seq).chr(' ').str(r.call).str(" passed ");
      write_range(w, r.lo, r.hi - r.lo);
      w.chr('\n');
    }
    Description first = describe(r.lo);
    Description last = describe(r.hi - 1);
    if (!first.found && !last.found) {
      ReportWriter(fd).str("    no guarded allocation near it\n");
      continue;
    }
    if (first.found) {
      ReportWriter(fd).str("    first byte: ");
      write_description(fd, first, "device");
    }
    // The last byte says more when the range runs past its allocation (the usual overflow).
    if (last.found && (!first.found || last.id != first.id || last.relation != Relation::Inside)) {
      ReportWriter(fd).str("    last byte: ");
      write_description(fd, last, "device");
    }
  }
  return n;
}

bool report_illegal_address(int code, const char* where) noexcept {
  static std::atomic<bool> said{false};
  if (code != kIllegalAddressError || said.exchange(true)) return false;
  constexpr int kStderr = 2;
  {
    ReportWriter w(kStderr);
    w.str("mate guard: device fault: ").str(where != nullptr ? where : "synchronize")
        .str(" returned an illegal-address error (700). A kernel touched memory it must not (a guard "
             "granule, a freed range, or a wild address); the driver reports this at the next "
             "synchronization and gives no address, and every later call on this context fails.\n")
        .str("  device ranges passed by recent API calls (newest first; the API log records them at "
             "MATE_LOGLEVEL >= 3):\n");
  }
  const std::size_t n = write_recent_ranges(kStderr);
  ReportWriter w(kStderr);
  if (n == 0) w.str("  none recorded (run with MATE_LOGLEVEL=3 to record them)\n");
  w.str("  the faulting address: rerun under compute-sanitizer (CUDA) or read the kernel log (dmesg: an "
        "NVIDIA Xid 13/31 line names the address); mate::guard::describe(address) then names the "
        "allocation\n");
  return true;
}

}  // namespace mate::guard
