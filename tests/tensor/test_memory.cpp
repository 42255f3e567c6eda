// Tensor memory (mate/tensor/memory.hpp): the one place that picks a backend for a DLDevice and
// moves a tensor's bytes out of and into its memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "dl_tensor.hpp"
#include "host_memory_device.hpp"
#include "mate/device/driver.hpp"
#include "mate/tensor/memory.hpp"
#include "mate/tensor/stats.hpp"

namespace {

using namespace mate::tensor;
using mate::device::Kind;
using mate::testing::dl_view;

struct Collected {
  std::vector<std::uint8_t> bytes;
  std::size_t pieces = 0;
};
bool collect(void* context, const void* data, std::size_t n) {
  auto* c = static_cast<Collected*>(context);
  c->bytes.insert(c->bytes.end(), static_cast<const std::uint8_t*>(data), static_cast<const std::uint8_t*>(data) + n);
  ++c->pieces;
  return true;
}

// Sets the CUDA backend for one test.
struct CudaBackendFor {
  explicit CudaBackendFor(mate::device::Backend* b) { set_device_backend(Kind::Cuda, b); }
  ~CudaBackendFor() { set_device_backend(Kind::Cuda, nullptr); }
};

TEST(TensorMemory, EachDeviceIsServedByItsBackend) {
  EXPECT_EQ(backend_for(DLDevice{kDLCPU, 0}), &mate::device::host_backend());
  EXPECT_EQ(backend_for(DLDevice{kDLCUDAHost, 0}), &mate::device::host_backend());  // pinned host memory
  EXPECT_EQ(backend_for(DLDevice{kDLVulkan, 0}), nullptr);
  mate::testing::HostMemoryDevice device;
  CudaBackendFor cuda(&device);
  EXPECT_EQ(backend_for(DLDevice{kDLCUDA, 0}), &device);
  EXPECT_EQ(backend_for(DLDevice{kDLCUDA, 1}), &device);  // every ordinal of the kind
  EXPECT_EQ(backend_for(DLDevice{kDLCUDAManaged, 0}), &device);
}

TEST(TensorMemory, DeviceBytesComeOutInBoundedChunksInLayoutOrder) {
  std::vector<float> data(1000);
  std::iota(data.begin(), data.end(), 0.0f);
  std::vector<std::int64_t> shape{10, 50}, strides{100, 2};  // every other element of 10 rows of 100
  DLTensor t = dl_view(data.data(), ScalarType::F32, shape, &strides, 0, {kDLCUDA, 0});
  mate::testing::HostMemoryDevice device;
  CudaBackendFor cuda(&device);
  Collected out;
  EXPECT_EQ(copy_extent_out(TensorView(t), collect, &out, {nullptr, 1000}), "");
  const ByteExtent e = TensorView(t).extent();
  ASSERT_EQ(out.bytes.size(), static_cast<std::size_t>(e.size()));
  EXPECT_EQ(std::memcmp(out.bytes.data(), data.data(), out.bytes.size()), 0);
  EXPECT_LE(device.max_read, 1000u);
  EXPECT_EQ(out.pieces, (out.bytes.size() + 999) / 1000);
  EXPECT_EQ(read_extent(TensorView(t)), out.bytes);
}

TEST(TensorMemory, UnreachableMemorySaysWhy) {
  std::vector<float> data(4);
  std::vector<std::int64_t> shape{4};
  DLTensor vulkan = dl_view(data.data(), ScalarType::F32, shape, nullptr, 0, {kDLVulkan, 0});
  Collected out;
  EXPECT_NE(copy_extent_out(TensorView(vulkan), collect, &out).find("cannot be read"), std::string::npos);
  EXPECT_THROW(read_extent(TensorView(vulkan)), std::runtime_error);
  EXPECT_NE(copy_bytes_in(DLDevice{kDLVulkan, 0}, 0x1000, data.data(), 4).find("no device backend writes"), std::string::npos);
  DLTensor null_data = dl_view(nullptr, ScalarType::F32, shape, nullptr, 0, {kDLCPU, 0});
  EXPECT_EQ(copy_extent_out(TensorView(null_data), collect, &out), "the tensor's data pointer is null");
  // A layout that describes no memory reads none, on the host and on a device alike.
  std::vector<std::int64_t> negative{4, -2};
  mate::testing::HostMemoryDevice device;
  CudaBackendFor cuda(&device);
  for (DLDevice d : {DLDevice{kDLCPU, 0}, DLDevice{kDLCUDA, 0}}) {
    DLTensor bad = dl_view(data.data(), ScalarType::F32, negative, nullptr, 0, d);
    Collected nothing;
    EXPECT_EQ(copy_extent_out(TensorView(bad), collect, &nothing), "invalid layout (negative dimension in shape): nothing read");
    EXPECT_EQ(nothing.pieces, 0u);
    EXPECT_THROW(read_extent(TensorView(bad)), std::runtime_error);
  }
  EXPECT_EQ(device.reads, 0u);
}

// While reads of a kind are skipped on a thread (a call captured into a graph), nothing reads
// that kind's memory: copies and statistics say why, without calling the backend.
TEST(TensorMemory, SkippedDeviceReadsAreNotMadeAndSayWhy) {
  std::vector<float> data{1, 2, 3, 4};
  std::vector<std::int64_t> shape{4};
  DLTensor cuda = dl_view(data.data(), ScalarType::F32, shape, nullptr, 0, {kDLCUDA, 0});
  DLTensor host = dl_view(data.data(), ScalarType::F32, shape, nullptr, 0, {kDLCPU, 0});
  mate::testing::HostMemoryDevice device;
  CudaBackendFor backend(&device);
  Collected out;
  {
    DeviceReadsSkipped skipped(Kind::Cuda, "CUDA graph capture in progress");
    ASSERT_NE(device_reads_skipped(Kind::Cuda), nullptr);
    EXPECT_EQ(device_reads_skipped(Kind::Musa), nullptr);
    EXPECT_EQ(copy_extent_out(TensorView(cuda), collect, &out), "not read: CUDA graph capture in progress");
    EXPECT_THROW(read_extent(TensorView(cuda)), std::runtime_error);
    StatsResult r = compute_stats(TensorView(cuda));
    EXPECT_FALSE(r.stats);
    EXPECT_EQ(r.unavailable, "stats skipped: CUDA graph capture in progress");
    EXPECT_TRUE(compute_stats(TensorView(host)).stats) << "host memory is still read";
    EXPECT_EQ(device.reads, 0u);
  }
  EXPECT_EQ(device_reads_skipped(Kind::Cuda), nullptr);
  EXPECT_TRUE(compute_stats(TensorView(cuda)).stats);
  EXPECT_GT(device.reads, 0u);
}

TEST(TensorMemory, StoredBytesPlacedAnywhereViewAsTheTensorAgain) {
  std::vector<float> data{0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<std::int64_t> shape{2, 2}, strides{-4, 1};  // rows 1 then 0
  DLTensor t = dl_view(data.data(), ScalarType::F32, shape, &strides, 4 * sizeof(float));
  const std::vector<std::uint8_t> bytes = read_extent(TensorView(t));
  StoredLayout layout;
  layout.dtype = t.dtype;
  layout.shape = shape;
  layout.strides = strides;
  layout.byte_offset = t.byte_offset;
  layout.data_begin = TensorView(t).extent().begin;
  // Copied into other memory through the device path (host backend for a host device).
  std::vector<std::uint8_t> elsewhere(bytes.size());
  ASSERT_EQ(copy_bytes_in(DLDevice{kDLCPU, 0}, reinterpret_cast<std::uintptr_t>(elsewhere.data()), bytes.data(), bytes.size()), "");
  const DLTensor back = layout.view_over(reinterpret_cast<std::uintptr_t>(elsewhere.data()));
  const float* origin = reinterpret_cast<const float*>(TensorView(back).origin());
  EXPECT_EQ(origin[0], 4.0f);   // element (0, 0)
  EXPECT_EQ(origin[1], 5.0f);   // element (0, 1)
  EXPECT_EQ(origin[-4], 0.0f);  // element (1, 0)
}

}  // namespace
