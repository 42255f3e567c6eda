// The device-fault report: the ranges recent calls passed (mate/core/recent_device_ranges.hpp),
// each with the guarded allocation nearest to it.
#include "mate/guard/device_fault_report.hpp"

#include <atomic>

#include "mate/core/recent_device_ranges.hpp"

#include "mate/guard/allocator.hpp"
#include "report.hpp"
#include "guard/report_output.hpp"

namespace mate::guard {

std::size_t write_recent_ranges(int fd) noexcept {
  core::RecentDeviceRange copy[core::kRecentDeviceRanges];
  const std::size_t n = core::recent_device_ranges(copy);
  for (std::size_t i = 0; i < n; ++i) {
    const core::RecentDeviceRange& r = copy[i];
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
  constexpr int kStderr = kReportOutput;  // the program's stderr from start-up, and the report file
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
