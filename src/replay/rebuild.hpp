// Rebuilding a dumped call's tensor arguments in memory, aliasing included (internal to replay).
//
// Each tensor is rebuilt from its input snapshot with its recorded layout. Tensors that were
// views of the same memory at capture time must be views of the same memory again: an in-place
// call `op(x, out=x)` or overlapping views of one buffer give other results on separate copies.
// The dump's call.json records each tensor's address range ("va": [lo, hi), the bytes its file
// holds); tensors on the same device whose ranges overlap share one buffer covering the union of
// their ranges, each placed at its recorded offset in it. Tensors without a usable range (older
// dumps, safetensors dumps, whose files are contiguous copies) get a buffer of their own.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mate/dump/call_record.hpp"
#include "mate/replay/replay.hpp"
#include "mate/tensor/tensor_view.hpp"

namespace mate::replay::detail {

// One allocation; shared by every tensor rebuilt over it, freed with the last.
struct Buffer {
  DLDevice device{};
  std::uintptr_t base = 0;
  std::size_t bytes = 0;
  TensorAllocator* allocator = nullptr;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
};

struct RebuiltTensor {
  dump::TensorRecord record;  // keeps shape and strides alive for `dl`
  DLTensor dl{};
  std::shared_ptr<Buffer> buffer;
};

// A tensor argument to rebuild: its snapshot and, when call.json records it, its address range.
struct TensorSource {
  dump::TensorRecord record;
  std::optional<tensor::VaRange> va;
};

// The address range a tensor argument had when it was recorded (call.json's "va", kept in the
// argument's metadata); nullopt when none was recorded (older dumps).
std::optional<tensor::VaRange> recorded_range(const dump::RecordedArg& arg);

// Rebuilds `sources` (nullopt entries stay null), sharing buffers between overlapping tensors.
// Throws std::runtime_error when memory cannot be allocated or written.
std::vector<std::unique_ptr<RebuiltTensor>> rebuild_tensors(std::vector<std::optional<TensorSource>> sources,
                                                            TensorAllocator& allocator);

}  // namespace mate::replay::detail
