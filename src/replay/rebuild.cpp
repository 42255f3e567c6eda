// Rebuilding a dumped call's tensor arguments, with the aliasing they had at capture time.
#include "rebuild.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace mate::replay::detail {

namespace {

using dump::TensorRecord;

// "0x7f12..." as the log writes addresses, or a plain JSON integer.
std::optional<std::uintptr_t> address(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (!j.is_string()) return std::nullopt;
  const std::string& s = j.get_ref<const std::string&>();
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return std::nullopt;
  std::uintptr_t v = 0;
  auto [end, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Copies `rec`'s bytes to `at` on its device.
void load(const TensorRecord& rec, std::uintptr_t at) {
  if (rec.data.empty()) return;
  if (tensor::memory_of(rec.device) == tensor::Memory::Host) {
    std::memcpy(reinterpret_cast<void*>(at), rec.data.data(), rec.data.size());
    return;
  }
  device::Backend* b = backend_for(rec.device);
  if (b == nullptr) throw std::runtime_error("no device backend writes " + tensor::device_name(rec.device) + " memory");
  device::Status st = b->write(at, rec.data.data(), rec.data.size());
  if (!st.ok())
    throw std::runtime_error(std::string("copy to ") + tensor::device_name(rec.device) + " failed (" + (st.what ? st.what : "?") + ")");
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

device::Backend* backend_for(DLDevice d) {
  const tensor::Memory m = tensor::memory_of(d);
  if (m == tensor::Memory::Host) return &device::host_backend();
  if (m == tensor::Memory::Other) return nullptr;
  return tensor::device_backend(tensor::device_kind(m));
}

Buffer::~Buffer() {
  if (base != 0) allocator->deallocate(device, base, bytes);
}

std::vector<std::optional<tensor::VaRange>> recorded_ranges(const dump::CallRecord& call) {
  std::vector<std::optional<tensor::VaRange>> out(call.inputs.size());
  // Only the default format stores the bytes of the recorded range; safetensors files hold
  // contiguous copies, whose bytes do not line up with it.
  if (call.tensor_format != "mate") return out;
  std::ifstream in(std::filesystem::path(call.dir) / dump::kCallFile, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return out;
  auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_array()) return out;
  for (std::size_t k = 0; k < out.size() && k < inputs->size(); ++k) {
    const nlohmann::json& a = (*inputs)[k];
    if (!a.is_object()) continue;
    auto va = a.find("va");
    if (va == a.end() || !va->is_array() || va->size() != 2) continue;
    const auto lo = address((*va)[0]), hi = address((*va)[1]);
    if (lo && hi && *lo <= *hi) out[k] = tensor::VaRange{*lo, *hi};
  }
  return out;
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
