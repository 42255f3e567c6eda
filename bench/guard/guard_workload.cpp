// The allocation workload bench/guard/run_guard_bench.sh runs under each debug allocator
// (LD_PRELOAD): alloc+free pairs over a fixed mix of sizes, with a window of live allocations,
// touching the first and last byte of each. Prints pairs per second and peak resident memory.
//
//   guard_workload [pairs] [window]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

// The high-water mark of this process's own address space (VmHWM). Not getrusage's ru_maxrss:
// Linux carries the peak of the image before execve into it, so a workload started by a large
// launcher (mate guard-run's forked child is a copy of mate) would be charged for the launcher.
long peak_resident_kib() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, status) != nullptr)
    if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  std::fclose(status);
  return kib;
}

int main(int argc, char** argv) {
  const long pairs = argc > 1 ? std::atol(argv[1]) : 100000;
  const std::size_t window = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 256;
  // Small objects dominate real programs; a few page-sized and large buffers.
  static const std::size_t kSizes[] = {16, 24, 32, 48, 64, 100, 128, 200, 256, 512,
                                       1000, 2048, 4000, 4096, 10000, 70000};
  const std::size_t kinds = sizeof kSizes / sizeof kSizes[0];
  std::vector<char*> live(window, nullptr);
  std::vector<std::size_t> live_size(window, 0);
  unsigned long checksum = 0;
  auto start = std::chrono::steady_clock::now();
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
  for (std::size_t s = 0; s < window; ++s) std::free(live[s]);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("pairs_per_s %.0f peak_rss_kib %ld checksum %lu\n", static_cast<double>(pairs) / seconds,
              peak_resident_kib(), checksum);
  return 0;
}
