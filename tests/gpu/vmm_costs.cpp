// Where a guarded device allocation's time goes: each virtual-memory step of the driver backend
// timed on its own (reserve an address range, map physical memory into it with access, write and
// read back a canary-sized piece, synchronize, unmap with the physical memory's release, release
// the range; and the whole mapping written and read back from pageable host memory), then a
// whole GuardAllocator allocate + deallocate of a buffer filling the granules and of a 1 KiB
// buffer (its canary fills the rest of the granule: what a small cudaMalloc pays), for one
// granule and for 16.
// Prints one line per step: microseconds per call, median of the rounds.
//
//   vmm_costs [ROUNDS]   (default 50; the driver is MATE_DEVICE_DRIVER's, as for the guard)
//
// On a GPU (tests/gpu/device_check.sh, check vmm_costs) it says which driver calls a pool of
// physical memory would save; here ctest runs it against the fake driver, so that it stays
// working. Exit: 0, 77 when no driver backend opens, 1 when a step fails.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "mate/device/driver.hpp"
#include "mate/guard/allocator.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median_us(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

bool ok(const mate::device::Status& st, const char* step) {
  if (st.ok()) return true;
  std::fprintf(stderr, "vmm_costs: %s failed: %s (code %d)\n", step, st.what ? st.what : "?", st.code);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 50;
  if (rounds < 1) {
    std::fprintf(stderr, "vmm_costs: ROUNDS must be a positive integer, got '%s'\n", argv[1]);
    return 2;
  }
  std::string reason;
  mate::device::DriverBackend* backend = mate::device::driver_backend(&reason);
  if (backend == nullptr) {
    std::printf("vmm_costs: no driver backend: %s\n", reason.c_str());
    return 77;
  }
  const std::size_t g = backend->granularity();
  std::printf("vmm_costs: %s, granularity %zu bytes, %d rounds, median us per call\n", backend->name(), g, rounds);
  for (std::size_t granules : {std::size_t{1}, std::size_t{16}}) {
    const std::size_t bytes = granules * g;
    std::vector<double> reserve, map, write, read, sync, unmap, release, write_all, read_all;
    std::vector<unsigned char> canary(64, 0xa5), back(64), whole(bytes, 0x5a);
    for (int r = 0; r < rounds; ++r) {
      std::uintptr_t base = 0;
      auto t0 = Clock::now();
      if (!ok(backend->reserve(bytes + 2 * g, &base), "reserve")) return 1;
      auto t1 = Clock::now();
      if (!ok(backend->map(base + g, bytes), "map")) return 1;
      auto t2 = Clock::now();
      if (!ok(backend->write(base + g + bytes - canary.size(), canary.data(), canary.size()), "write")) return 1;
      auto t3 = Clock::now();
      if (!ok(backend->read(back.data(), base + g + bytes - back.size(), back.size()), "read")) return 1;
      auto t4 = Clock::now();
      if (!ok(backend->synchronize(), "synchronize")) return 1;
      auto t5 = Clock::now();
      // The whole mapping from and to pageable host memory: what a canary filling it costs.
      if (!ok(backend->write(base + g, whole.data(), bytes), "write all")) return 1;
      auto t5a = Clock::now();
      if (!ok(backend->read(whole.data(), base + g, bytes), "read all")) return 1;
      auto t5b = Clock::now();
      if (!ok(backend->unmap(base + g, bytes), "unmap")) return 1;
      auto t6 = Clock::now();
      if (!ok(backend->release(base, bytes + 2 * g), "release")) return 1;
      auto t7 = Clock::now();
      auto us = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double, std::micro>(b - a).count();
      };
      reserve.push_back(us(t0, t1));
      map.push_back(us(t1, t2));
      write.push_back(us(t2, t3));
      read.push_back(us(t3, t4));
      sync.push_back(us(t4, t5));
      write_all.push_back(us(t5, t5a));
      read_all.push_back(us(t5a, t5b));
      unmap.push_back(us(t5b, t6));
      release.push_back(us(t6, t7));
      if (back != canary) {
        std::fprintf(stderr, "vmm_costs: the bytes read back differ from those written\n");
        return 1;
      }
    }
    // The whole guarded allocation, as `mate guard-run` makes it (no backtraces: their cost is
    // the host's and measured elsewhere; quarantine at its default): once for a buffer that fills
    // the granules (a 64-byte canary), once for a 1 KiB buffer, whose canary fills the rest of
    // its granule (what a program's small cudaMalloc pays).
    mate::guard::GuardAllocatorConfig config;
    config.backend = backend->kind();
    config.backtraces = false;
    double guarded_us[2][2] = {};
    const std::size_t guarded_sizes[2] = {bytes - 64, 1024};
    for (int which = 0; which < 2; ++which) {
      std::vector<double> alloc, dealloc;
      mate::guard::GuardAllocator guard(*backend, config);
      for (int r = 0; r < rounds; ++r) {
        auto t0 = Clock::now();
        mate::guard::AllocResult a = guard.allocate(guarded_sizes[which]);
        auto t1 = Clock::now();
        if (!a) {
          std::fprintf(stderr, "vmm_costs: guarded allocate failed: %s\n", a.message);
          return 1;
        }
        guard.deallocate(a.ptr);
        auto t2 = Clock::now();
        alloc.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        dealloc.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      }
      guarded_us[which][0] = median_us(alloc);
      guarded_us[which][1] = median_us(dealloc);
    }
    std::printf(
        "vmm_costs: %zu granule(s): reserve %.1f, map (create+map+access) %.1f, write 64 B %.1f, read 64 B %.1f, "
        "synchronize %.1f, write all %.1f, read all %.1f, unmap (+release memory) %.1f, release range %.1f; guarded allocate %.1f, deallocate %.1f; "
        "1 KiB buffer (canary fills the rest): allocate %.1f, deallocate %.1f\n",
        granules, median_us(reserve), median_us(map), median_us(write), median_us(read), median_us(sync),
        median_us(write_all), median_us(read_all), median_us(unmap), median_us(release), guarded_us[0][0], guarded_us[0][1], guarded_us[1][0], guarded_us[1][1]);
  }
  return 0;
}
