// Rebuilding a dumped call's tensor arguments, with the aliasing they had at capture time.
#include "rebuild.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "mate/tensor/memory.hpp"

namespace mate::replay::detail {

namespace {

using dump::TensorRecord;

// Copies `rec`'s bytes to `at` on its device.
void load(const TensorRecord& rec, std::uintptr_t at) {
  if (std::string error = tensor::copy_bytes_in(rec.device, at, rec.data.data(), rec.data.size()); !error.empty())
    throw std::runtime_error(error);
}

std::shared_ptr<Buffer> allocate(DLDevice device, std::size_t bytes, TensorAllocator& allocator) {
  auto b = std::make_shared<Buffer>();
  b->device = device;
  b->bytes = std::max<std::size_t>(bytes, 1);
  b->allocator = &allocator;
  b->base = allocator.allocate(device, b->bytes);
  return b;
}

}  // namespace

Buffer::~Buffer() {
  if (base != 0) allocator->deallocate(device, base, bytes);
}

std::optional<tensor::VaRange> recorded_range(const dump::RecordedArg& arg) {
  if (!arg.tensor || arg.tensor->dl().data == nullptr) return std::nullopt;
  return arg.tensor->view().va_range();
}

std::vector<std::unique_ptr<RebuiltTensor>> rebuild_tensors(std::vector<std::optional<TensorSource>> sources,
                                                            TensorAllocator& allocator) {
  std::vector<std::unique_ptr<RebuiltTensor>> out(sources.size());
  // Tensors that can share: a recorded range that matches the stored bytes (a range that does
  // not is from some other layout, and placing bytes by it would be wrong).
  std::vector<std::size_t> placed;
  for (std::size_t k = 0; k < sources.size(); ++k) {
    if (!sources[k]) continue;
    const TensorSource& s = *sources[k];
    if (s.va && s.va->size() > 0 && s.va->size() == s.record.data.size()) placed.push_back(k);
  }
  // By device, then address: runs of overlapping ranges are one buffer at capture time.
  std::sort(placed.begin(), placed.end(), [&](std::size_t a, std::size_t b) {
    const TensorSource &x = *sources[a], &y = *sources[b];
    return std::tuple(static_cast<int>(x.record.device.device_type), x.record.device.device_id, x.va->lo, a) <
           std::tuple(static_cast<int>(y.record.device.device_type), y.record.device.device_id, y.va->lo, b);
  });
  for (std::size_t i = 0; i < placed.size();) {
    const DLDevice device = sources[placed[i]]->record.device;
    const std::uintptr_t lo = sources[placed[i]]->va->lo;
    std::uintptr_t hi = sources[placed[i]]->va->hi;
    std::size_t j = i + 1;
    for (; j < placed.size(); ++j) {
      const TensorSource& s = *sources[placed[j]];
      if (s.record.device.device_type != device.device_type || s.record.device.device_id != device.device_id) break;
      if (s.va->lo >= hi) break;  // merely adjacent is not shared memory
      hi = std::max(hi, s.va->hi);
    }
    // One buffer for the union (every byte of it belongs to some member: they chain by overlap).
    // The snapshots were taken together, before the call, so overlapping bytes agree.
    std::shared_ptr<Buffer> buffer = allocate(device, hi - lo, allocator);
    for (std::size_t m = i; m < j; ++m) {
      TensorSource& s = *sources[placed[m]];
      auto r = std::make_unique<RebuiltTensor>();
      const std::uintptr_t at = buffer->base + (s.va->lo - lo);
      load(s.record, at);
      r->record = std::move(s.record);
      r->buffer = buffer;
      r->dl = r->record.view_over(at);
      out[placed[m]] = std::move(r);
    }
    i = j;
  }
  for (std::size_t k = 0; k < sources.size(); ++k) {
    if (!sources[k] || out[k]) continue;
    auto r = std::make_unique<RebuiltTensor>();
    r->record = std::move(sources[k]->record);
    r->buffer = allocate(r->record.device, r->record.data.size(), allocator);
    load(r->record, r->buffer->base);
    r->dl = r->record.view_over(r->buffer->base);
    out[k] = std::move(r);
  }
  return out;
}

}  // namespace mate::replay::detail
