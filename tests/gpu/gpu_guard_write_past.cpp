// Real GPU: a kernel writing one element past a buffer that ends against an unmapped guard
// granule must be reported by the driver as CUDA_ERROR_ILLEGAL_ADDRESS at the next
// synchronization. Exit 0: seen; 1: not seen (or setup failed); 77: no GPU here (skip).
#include <cstdio>
#include <string>

#include "mate/device/driver.hpp"

extern "C" int mate_gpu_store_one(unsigned long long device_ptr, int index, float value);
extern "C" const char* mate_gpu_error_text(int error);

namespace {

constexpr int kIllegalAddress = 700;  // CUDA_ERROR_ILLEGAL_ADDRESS
constexpr int kElements = 64;

int fail(const std::string& text) {
  std::fprintf(stderr, "FAIL: %s\n", text.c_str());
  return 1;
}

}  // namespace

int main() {
  using namespace mate::device;
  std::string reason;
  auto backend = open_driver_backend(Kind::Cuda, 0, &reason);
  if (!backend) {
    std::printf("SKIP: no CUDA device: %s\n", reason.c_str());
    return 77;
  }
  std::printf("device 0: sm_%d%d, granularity %zu bytes, driver %s\n", backend->arch().major,
              backend->arch().minor, backend->granularity(), backend->library());

  // [ mapped granule .......... | buffer of 64 floats ][ guard granule: reserved, unmapped ]
  const std::size_t g = backend->granularity();
  std::uintptr_t base = 0;
  Status s = backend->reserve(2 * g, &base);
  if (!s.ok()) return fail(describe(*backend, s));
  s = backend->map(base, g);
  if (!s.ok()) return fail(describe(*backend, s));
  const std::uintptr_t buffer = base + g - kElements * sizeof(float);

  // In bounds first: the kernel runs and its store is visible.
  if (int e = mate_gpu_store_one(buffer, kElements - 1, 42.0f); e != 0)
    return fail("launch failed: cudaError_t " + std::to_string(e) + " (" +
                mate_gpu_error_text(e) + ")");
  s = backend->synchronize();
  if (!s.ok()) return fail("in-bounds store: " + describe(*backend, s));
  float last = 0;
  s = backend->read(&last, buffer + (kElements - 1) * sizeof(float), sizeof last);
  if (!s.ok() || last != 42.0f) return fail("the in-bounds store did not land");

  // One element past the end: into the guard granule.
  if (int e = mate_gpu_store_one(buffer, kElements, 1.0f); e != 0)
    return fail("launch failed: cudaError_t " + std::to_string(e) + " (" +
                mate_gpu_error_text(e) + ")");
  s = backend->synchronize();
  std::printf("synchronize after the write past the buffer: %s\n",
              describe(*backend, s).c_str());
  if (s.code != kIllegalAddress)
    return fail("expected CUDA_ERROR_ILLEGAL_ADDRESS (700) from the synchronization");
  // The context is now unusable (the error is sticky): leave without cleaning up.
  std::printf("OK: the guard granule turned a one-element overrun into an illegal-address error\n");
  return 0;
}
