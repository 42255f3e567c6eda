// A "device" backend whose memory is host memory, for tests of the paths that go through the
// device layer (chunked reads in stats and dumps, replay rebuilding tensors on their device):
// device pointers are host pointers, reads and writes are memcpy, reservations aligned_alloc.
// It counts every call; tests override read() to fail, stop or record.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "mate/device/backend.hpp"

namespace mate::testing {

class HostMemoryDevice : public mate::device::Backend {
 public:
  using Status = mate::device::Status;

  mate::device::Kind kind() const noexcept override { return mate::device::Kind::Cuda; }
  const char* name() const noexcept override { return "host-memory-cuda"; }
  std::size_t granularity() const noexcept override { return 4096; }
  std::size_t default_alignment() const noexcept override { return 256; }
  Status reserve(std::size_t bytes, std::uintptr_t* base) noexcept override {
    ++reserves;
    *base = reinterpret_cast<std::uintptr_t>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    return *base != 0 ? Status{} : Status{2, "aligned_alloc"};
  }
  Status release(std::uintptr_t base, std::size_t) noexcept override {
    ++releases;
    std::free(reinterpret_cast<void*>(base));
    return {};
  }
  Status map(std::uintptr_t, std::size_t) noexcept override { return {}; }
  Status unmap(std::uintptr_t, std::size_t) noexcept override { return {}; }
  Status write(std::uintptr_t dst, const void* src, std::size_t bytes) noexcept override {
    ++writes;
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    return {};
  }
  Status read(void* dst, std::uintptr_t src, std::size_t bytes) noexcept override {
    ++reads;
    total_read += bytes;
    max_read = std::max(max_read, bytes);
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return {};
  }
  Status fill(std::uintptr_t dst, unsigned char value, std::size_t bytes) noexcept override {
    std::memset(reinterpret_cast<void*>(dst), value, bytes);
    return {};
  }
  Status synchronize() noexcept override { return {}; }

  int reserves = 0, releases = 0, writes = 0;
  std::size_t reads = 0, total_read = 0, max_read = 0;
};

}  // namespace mate::testing
