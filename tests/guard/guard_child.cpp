// Child process of the detection matrix: allocates through the installed guarded allocator,
// commits one memory bug, and lets the allocator's report (and the signal) end the process.
//
//   guard_child <host|cu|mu> <tail|head> <size> <case>
//   case: overflow1 | overflowA | overflowG | underrun1 | uaf | double_free | invalid_free | clean
//
// Prints "target #<id> user=0x<ptr> A=<alignment> G=<granularity>" before the bug, so the test
// knows what the report must name. A "kernel" here is host code touching the pointer; through
// the fake driver device memory is host memory with real protections, so guard hits fault.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mate/core/crash_context.hpp"
#include "mate/guard/allocator.hpp"

namespace {

// Read-modify-write that always changes the byte, so a canary hit is never a silent no-op.
void kernel_touch(std::uintptr_t address) {
  auto* p = reinterpret_cast<volatile unsigned char*>(address);
  *p = static_cast<unsigned char>(~*p);
}

// What API logging registers in a real program: the call in flight, added to every report.
std::size_t in_flight(char* buffer, std::size_t cap) noexcept {
  static const char text[] = "  in flight: guard_child kernel\n";
  std::size_t n = sizeof text - 1 < cap ? sizeof text - 1 : cap;
  std::memcpy(buffer, text, n);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: guard_child <host|cu|mu> <tail|head> <size> <case>\n");
    return 2;
  }
  const std::string backend = argv[1], mode = argv[2], what = argv[4];
  const std::size_t size = std::strtoull(argv[3], nullptr, 10);

  mate::core::register_crash_context(in_flight);
  mate::guard::GuardAllocatorConfig config;
  config.mode = mode == "head" ? mate::guard::Mode::Head : mate::guard::Mode::Tail;
  config.backend = backend == "cu"   ? mate::device::Kind::Cuda
                   : backend == "mu" ? mate::device::Kind::Musa
                                     : mate::device::Kind::Host;
  config.max_allocations = 1024;
  mate::guard::GuardAllocator& guard = mate::guard::install_guard_allocator(config);

  // An allocation before the target, so ids in reports are checked to be the right ones.
  auto warmup = guard.allocate(64);
  auto target = guard.allocate(size);
  if (!warmup || !target) {
    std::fprintf(stderr, "allocation failed: %s\n", target.message ? target.message : warmup.message);
    return 3;
  }
  const std::size_t a = guard.backend().default_alignment();
  const std::size_t g = guard.backend().granularity();
  std::printf("target #%llu user=0x%llx A=%zu G=%zu\n",
              static_cast<unsigned long long>(guard.describe(target.ptr).id),
              static_cast<unsigned long long>(target.ptr), a, g);
  std::fflush(stdout);

  const std::uintptr_t p = target.ptr;
  if (what == "overflow1") {
    kernel_touch(p + size);
  } else if (what == "overflowA") {
    kernel_touch(p + size + a - 1);
  } else if (what == "overflowG") {
    kernel_touch(p + size + g - 1);
  } else if (what == "underrun1") {
    kernel_touch(p - 1);
  } else if (what == "uaf") {
    guard.deallocate(p);
    kernel_touch(p);
    return 0;
  } else if (what == "double_free") {
    guard.deallocate(p);
    guard.deallocate(p);
    return 0;
  } else if (what == "invalid_free") {
    guard.deallocate(p + 1);
    return 0;
  } else if (what != "clean") {
    std::fprintf(stderr, "unknown case %s\n", what.c_str());
    return 2;
  }
  guard.deallocate(p);  // canary side: caught here
  guard.deallocate(warmup.ptr);
  std::printf("done\n");
  return 0;
}
