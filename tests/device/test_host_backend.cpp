// The host backend's contract: reserved space faults, mapped space works, unmapped space faults
// again and no longer counts as resident.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "mate/device/backend.hpp"

namespace {

using mate::device::host_backend;

bool resident(std::uintptr_t addr, std::size_t bytes) {
  std::vector<unsigned char> vec(bytes / host_backend().granularity());
  if (mincore(reinterpret_cast<void*>(addr), bytes, vec.data()) != 0) return false;
  for (unsigned char v : vec)
    if (v & 1) return true;
  return false;
}

TEST(HostBackend, Properties) {
  EXPECT_EQ(host_backend().granularity(), static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_EQ(host_backend().default_alignment(), 16u);
  EXPECT_STREQ(host_backend().name(), "host");
}

TEST(HostBackend, MapWriteReadUnmapRelease) {
  auto& b = host_backend();
  const std::size_t g = b.granularity();
  std::uintptr_t base = 0;
  ASSERT_TRUE(b.reserve(4 * g, &base).ok());
  ASSERT_TRUE(b.map(base + g, 2 * g).ok());
  const char msg[] = "hello";
  ASSERT_TRUE(b.write(base + g, msg, sizeof msg).ok());
  ASSERT_TRUE(b.fill(base + g + 100, 0xAB, 10).ok());
  char back[sizeof msg];
  ASSERT_TRUE(b.read(back, base + g, sizeof msg).ok());
  EXPECT_STREQ(back, "hello");
  EXPECT_EQ(reinterpret_cast<unsigned char*>(base + g)[105], 0xAB);
  EXPECT_TRUE(resident(base + g, 2 * g));
  ASSERT_TRUE(b.unmap(base + g, 2 * g).ok());
  EXPECT_FALSE(resident(base + g, 2 * g));
  ASSERT_TRUE(b.release(base, 4 * g).ok());
}

TEST(HostBackendDeathTest, ReservedAndUnmappedRangesFault) {
  auto& b = host_backend();
  const std::size_t g = b.granularity();
  std::uintptr_t base = 0;
  ASSERT_TRUE(b.reserve(2 * g, &base).ok());
  ASSERT_TRUE(b.map(base, g).ok());
  *reinterpret_cast<volatile char*>(base) = 1;
  EXPECT_DEATH(*reinterpret_cast<volatile char*>(base + g) = 1, "");
  ASSERT_TRUE(b.unmap(base, g).ok());
  EXPECT_DEATH(*reinterpret_cast<volatile char*>(base) = 1, "");
  ASSERT_TRUE(b.release(base, 2 * g).ok());
}

}  // namespace
