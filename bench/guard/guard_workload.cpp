// The allocation workload bench/guard/run_guard_bench.sh runs under each debug allocator
// (LD_PRELOAD): alloc+free pairs over a fixed mix of sizes, with a window of live allocations,
// touching the first and last byte of each. Prints pairs per second, the peak resident memory and
// the private (anonymous) resident memory with the window and the allocator's quarantine full.
//
//   guard_workload [pairs] [window]      (a C++ program: the C++ runtime loaded)
//   guard_workload_c [pairs] [window]    (the same code with only the C library, as `sort` or
//                                          python3 run)
//
// It calls only the C library, so that both builds run the same code.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

double seconds_now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// One "Name: N kB" field of /proc/self/status, -1 when absent. The peak is VmHWM, the
// high-water mark of this process's own address space, not getrusage's ru_maxrss: Linux carries
// the peak of the image before execve into it, so a workload started by a large launcher (mate
// guard-run's forked child is a copy of mate) would be charged for the launcher.
long status_kib(const char* field) {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return -1;
  char line[256];
  long kib = -1;
  const std::size_t length = std::strlen(field);
  while (std::fgets(line, sizeof line, status) != nullptr)
    if (std::strncmp(line, field, length) == 0 && line[length] == ':' &&
        std::sscanf(line + length + 1, "%ld", &kib) == 1)
      break;
  std::fclose(status);
  return kib;
}

}  // namespace

int main(int argc, char** argv) {
  const long pairs = argc > 1 ? std::atol(argv[1]) : 100000;
  const std::size_t window = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 256;
  // Small objects dominate real programs; a few page-sized and large buffers.
  static const std::size_t kSizes[] = {16, 24, 32, 48, 64, 100, 128, 200, 256, 512,
                                       1000, 2048, 4000, 4096, 10000, 70000};
  const std::size_t kinds = sizeof kSizes / sizeof kSizes[0];
  auto** live = static_cast<char**>(std::calloc(window, sizeof(char*)));
  auto* live_size = static_cast<std::size_t*>(std::calloc(window, sizeof(std::size_t)));
  if (live == nullptr || live_size == nullptr) return 1;
  unsigned long checksum = 0;
  const double start = seconds_now();
  for (long i = 0; i < pairs; ++i) {
    std::size_t slot = static_cast<std::size_t>(i * 2654435761u) % window;
    if (live[slot] != nullptr) {
      checksum += static_cast<unsigned char>(live[slot][live_size[slot] - 1]);
      std::free(live[slot]);
    }
    std::size_t n = kSizes[static_cast<std::size_t>(i * 40503u) % kinds];
    char* p = static_cast<char*>(std::malloc(n));
    if (p == nullptr) {
      std::fprintf(stderr, "malloc(%zu) failed at pair %ld\n", n, i);
      return 1;
    }
    p[0] = static_cast<char>(i);
    p[n - 1] = static_cast<char>(i >> 3);
    live[slot] = p;
    live_size[slot] = n;
  }
  // The fullest point: the window is live and the quarantine (if any) holds the freed ones.
  // Sampled outside the timing.
  const double sample_start = seconds_now();
  const long anon_kib = status_kib("RssAnon");
  const double sample_end = seconds_now();
  for (std::size_t s = 0; s < window; ++s) std::free(live[s]);
  const double seconds = seconds_now() - start - (sample_end - sample_start);
  std::printf("pairs_per_s %.0f peak_rss_kib %ld anon_kib %ld checksum %lu\n", static_cast<double>(pairs) / seconds,
              status_kib("VmHWM"), anon_kib, checksum);
  return 0;
}
