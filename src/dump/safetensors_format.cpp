// safetensors files (https://github.com/huggingface/safetensors, "Format"): an 8-byte
// little-endian header size N, N bytes of UTF-8 JSON starting with '{' (padding: trailing
// spaces), then the byte buffer. Each tensor: {"dtype", "shape", "data_offsets": [begin, end]}
// relative to the buffer, row-major contiguous, little-endian; the offsets cover the buffer with
// no holes or overlaps. "__metadata__" is a string-to-string map: MATE keeps each tensor's
// original strides, byte offset and device there. MATE writes one such file per call phase.
#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "file_io.hpp"
#include "json_numbers.hpp"
#include "mate/dump/tensor_file.hpp"
#include "tensor_format.hpp"

namespace mate::dump {

namespace {

using json = nlohmann::json;
using tensor::ScalarType;

constexpr std::pair<ScalarType, const char*> kNames[] = {
    {ScalarType::F64, "F64"},   {ScalarType::F32, "F32"},         {ScalarType::F16, "F16"},
    {ScalarType::BF16, "BF16"}, {ScalarType::F8E4M3, "F8_E4M3"},  {ScalarType::F8E5M2, "F8_E5M2"},
    {ScalarType::I8, "I8"},     {ScalarType::I16, "I16"},         {ScalarType::I32, "I32"},
    {ScalarType::I64, "I64"},   {ScalarType::U8, "U8"},           {ScalarType::U16, "U16"},
    {ScalarType::U32, "U32"},   {ScalarType::U64, "U64"},         {ScalarType::Bool, "BOOL"},
};

std::uint64_t contiguous_bytes(const tensor::TensorView& t) {
  return static_cast<std::uint64_t>(t.numel()) * t.element_size();
}

std::string header_for(const std::vector<NamedTensor>& tensors) {
  json h = json::object();
  json meta = {{"format", "mate"}};
  std::uint64_t at = 0;
  for (const NamedTensor& n : tensors) {
    const std::uint64_t size = contiguous_bytes(n.view);
    h[n.key] = {{"dtype", safetensors_dtype(n.view.dtype())}, {"shape", n.view.shape()}, {"data_offsets", {at, at + size}}};
    at += size;
    meta["mate." + n.key + ".strides"] = json(n.view.strides()).dump();
    meta["mate." + n.key + ".byte_offset"] = std::to_string(n.view.byte_offset());
    meta["mate." + n.key + ".device"] = tensor::device_name(n.view.device());
    meta["mate." + n.key + ".device_type"] = std::to_string(static_cast<int>(n.view.device().device_type));
    meta["mate." + n.key + ".device_id"] = std::to_string(n.view.device().device_id);
  }
  h["__metadata__"] = meta;
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the buffer starts 8-byte aligned
  return text;
}

std::uint64_t read_u64le(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Row-major contiguous copy of a strided tensor whose touched bytes are `extent`.
std::vector<std::uint8_t> gather(const tensor::TensorView& t, const std::vector<std::uint8_t>& extent) {
  const std::size_t es = t.element_size();
  std::vector<std::uint8_t> out(contiguous_bytes(t));
  if (out.empty()) return out;
  const int nd = t.ndim();
  std::vector<std::int64_t> idx(static_cast<std::size_t>(nd), 0);
  const std::int64_t begin = t.extent().begin;
  for (std::size_t k = 0; k < out.size(); k += es) {
    std::int64_t off = 0;
    for (int i = 0; i < nd; ++i) off += idx[static_cast<std::size_t>(i)] * t.stride(i);
    std::memcpy(out.data() + k, extent.data() + (off * static_cast<std::int64_t>(es) - begin), es);
    for (int i = nd - 1; i >= 0; --i) {
      if (++idx[static_cast<std::size_t>(i)] < t.shape(i)) break;
      idx[static_cast<std::size_t>(i)] = 0;
    }
  }
  return out;
}

// One tensor entry of the header, checked as the specification requires: a known dtype, offsets
// inside the buffer (`buffer` bytes) matching shape x dtype size.
struct Entry {
  ScalarType type;
  std::vector<std::int64_t> shape;
  std::uint64_t begin, end;
};
struct EntryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Entry check_entry(const std::string& name, const json& e, std::uint64_t buffer) {
  const std::string dtype = e.at("dtype").get<std::string>();
  std::optional<ScalarType> st;
  for (const auto& [type, type_name] : kNames)
    if (dtype == type_name) st = type;
  if (!st) throw EntryError("tensor " + name + " has unknown dtype \"" + dtype + "\"");
  auto shape = detail::integer_list_at<std::int64_t>(e, "shape");
  if (static_cast<int>(shape.size()) > kMaxRank) throw EntryError("tensor " + name + " has too many dimensions");
  auto offs = detail::integer_list_at<std::uint64_t>(e, "data_offsets");
  if (offs.size() != 2 || offs[0] > offs[1] || offs[1] > buffer) throw EntryError("tensor " + name + " has data_offsets outside the buffer");
  std::int64_t count = static_cast<std::int64_t>(tensor::element_size(tensor::dl_dtype(*st)));
  for (std::int64_t d : shape)
    if (d < 0 || detail::mul_overflows(count, d, &count)) throw EntryError("tensor " + name + " has an invalid shape");
  if (static_cast<std::uint64_t>(count) != offs[1] - offs[0]) throw EntryError("tensor " + name + ": data_offsets do not match shape and dtype");
  return Entry{*st, std::move(shape), offs[0], offs[1]};
}

bool file_sink(void* context, const void* data, std::size_t bytes) {
  return static_cast<detail::NewFile*>(context)->write(data, bytes);
}

}  // namespace

std::string safetensors_dtype(DLDataType t) {
  const ScalarType s = tensor::scalar_type(t);
  for (const auto& [type, name] : kNames)
    if (type == s) return name;
  return "";
}

std::uint64_t safetensors_file_size(const std::vector<NamedTensor>& tensors) {
  std::uint64_t total = 8 + header_for(tensors).size();
  for (const NamedTensor& n : tensors) total += contiguous_bytes(n.view);
  return total;
}

WriteResult write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors, const ReadOptions& options) {
  WriteResult r;
  for (const NamedTensor& n : tensors) {
    if (safetensors_dtype(n.view.dtype()).empty()) {
      r.error = "tensor " + n.key + " has dtype " + tensor::dtype_name(n.view.dtype()) + ", which safetensors cannot store";
      return r;
    }
  }
  detail::NewFile file(path);
  const std::string header = header_for(tensors);
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bool ok = file.write(prefix.data(), 8) && file.write(header.data(), header.size());
  for (const NamedTensor& n : tensors) {
    if (!ok) break;
    if (n.view.numel() == 0) continue;
    std::string error;
    if (n.view.is_contiguous() && n.view.extent().size() == static_cast<std::int64_t>(contiguous_bytes(n.view))) {
      error = tensor::copy_extent_out(n.view, file_sink, &file, options);
    } else {
      try {
        std::vector<std::uint8_t> packed = gather(n.view, tensor::read_extent(n.view, options));
        if (!file.write(packed.data(), packed.size())) error = "write failed";
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    if (!error.empty()) {
      r.read_failed = file.ok();
      r.error = file.ok() ? "tensor " + n.key + ": " + error : file.error();
      ok = false;
    }
  }
  if (ok && !file.commit()) r.error = file.error();
  if (!ok && r.error.empty()) r.error = file.error();
  r.bytes = file.written();
  return r;
}

namespace {

// The header size in the first 8 bytes, checked against the file's size.
std::uint64_t safetensors_header_size(std::string_view prefix, std::uint64_t file_size, std::string_view what) {
  auto bad = [&](const std::string& why) { return DumpError(std::string(what) + ": " + why); };
  if (file_size < 8 || prefix.size() < 8) throw bad("truncated: shorter than the 8-byte header size");
  const std::uint64_t n = read_u64le(prefix.data());
  if (n > 100'000'000) throw bad("header size " + std::to_string(n) + " exceeds the format's limit of 100000000");
  if (n > file_size - 8) throw bad("truncated: header of " + std::to_string(n) + " bytes, file has " + std::to_string(file_size - 8));
  return n;
}

// The tensor `key` described by `head` (the size and the whole header) of a file of `file_size`
// bytes, without its data, which lies at [begin, end) of the file.
TensorRecord parse_safetensors_layout(std::string_view head, std::uint64_t file_size, std::string_view key,
                                      std::string_view what, std::uint64_t& begin, std::uint64_t& end) {
  auto bad = [&](const std::string& why) { return DumpError(std::string(what) + ": " + why); };
  const std::uint64_t n = safetensors_header_size(head, file_size, what);
  const std::string_view text = head.substr(8, n);
  if (text.empty() || text[0] != '{') throw bad("header does not start with '{'");
  json h = json::parse(text, nullptr, false);
  if (h.is_discarded() || !h.is_object()) throw bad("header is not a JSON object");
  const std::uint64_t buffer = file_size - 8 - n;
  TensorRecord out;
  bool found = false;
  try {
    // Every entry is checked (check_entry); together they cover the buffer without holes.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (auto it = h.begin(); it != h.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      const Entry entry = check_entry(it.key(), it.value(), buffer);
      ranges.emplace_back(entry.begin, entry.end);
      if (it.key() == key) {
        found = true;
        out.dtype = tensor::dl_dtype(entry.type);
        out.shape = entry.shape;
        out.strides = tensor::contiguous_strides(entry.shape);
        begin = 8 + n + entry.begin;
        end = 8 + n + entry.end;
      }
    }
    std::sort(ranges.begin(), ranges.end());
    std::uint64_t at = 0;
    for (auto [b, e] : ranges) {
      if (b != at) throw bad("the byte buffer has a hole or overlap at offset " + std::to_string(std::min(b, at)));
      at = e;
    }
    if (at != buffer) throw bad(at < buffer ? "bytes after the last tensor" : "truncated byte buffer");
    if (!found) throw bad("no tensor named \"" + std::string(key) + "\"");
    // MATE's metadata: the device, for rebuilding there (the layout stays contiguous).
    if (h.contains("__metadata__")) {
      const json& m = h["__metadata__"];
      const std::string prefix = "mate." + std::string(key) + ".";
      if (m.contains(prefix + "device_type"))
        out.device.device_type = static_cast<DLDeviceType>(std::stoi(m.at(prefix + "device_type").get<std::string>()));
      if (m.contains(prefix + "device_id")) out.device.device_id = std::stoi(m.at(prefix + "device_id").get<std::string>());
    }
  } catch (const EntryError& e) {
    throw bad(e.what());
  } catch (const detail::FieldError& e) {
    throw bad(std::string("invalid header: ") + e.what());
  } catch (const json::exception& e) {
    throw bad(std::string("invalid header: ") + e.what());
  } catch (const std::logic_error& e) {  // stoi
    throw bad(std::string("invalid metadata value: ") + e.what());
  }
  return out;
}

}  // namespace

TensorRecord parse_safetensors(std::string_view bytes, std::string_view key, std::string_view what) {
  std::uint64_t begin = 0, end = 0;
  TensorRecord out = parse_safetensors_layout(bytes, bytes.size(), key, what, begin, end);
  out.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(begin), bytes.begin() + static_cast<std::ptrdiff_t>(end));
  return out;
}

// The header first, then only the one tensor's bytes (checked against the file's size).
TensorRecord read_safetensors(const std::string& path, std::string_view key) {
  const detail::DumpFile file(path);
  const std::string prefix = file.read_string(0, static_cast<std::size_t>(std::min<std::uint64_t>(file.size(), 8)));
  const std::uint64_t n = safetensors_header_size(prefix, file.size(), path);
  const std::string head = prefix + file.read_string(8, static_cast<std::size_t>(n));
  std::uint64_t begin = 0, end = 0;
  TensorRecord out = parse_safetensors_layout(head, file.size(), key, path, begin, end);
  out.data = detail::data_buffer(end - begin, path);
  file.read_at(begin, out.data.data(), out.data.size());
  return out;
}

namespace detail {

namespace {

class SafetensorsFormat final : public TensorFormat {
 public:
  std::string_view name() const noexcept override { return "safetensors"; }
  // Contiguous copies: the bytes do not line up with the recorded address range.
  bool keeps_layout() const noexcept override { return false; }

  void place(std::string_view phase, std::vector<PhaseTensor>& tensors) const override {
    for (PhaseTensor& t : tensors) {
      t.file = std::string(phase) + ".safetensors";
      t.key = t.stem;
    }
  }

  std::uint64_t estimate_size(const std::vector<PhaseTensor>& tensors) const override {
    return tensors.empty() ? 0 : safetensors_file_size(named(tensors));
  }

  std::string write(const std::string& call_dir, std::vector<PhaseTensor>& tensors, std::uint64_t& written) const override {
    if (tensors.empty()) return "";
    const WriteResult r = write_safetensors(call_dir + "/" + tensors.front().file, named(tensors));
    written += r.bytes;
    if (r.read_failed) {
      for (PhaseTensor& t : tensors) t.read_error = r.error;  // one file: none of them is saved
      return "";
    }
    return r.error;
  }

  TensorRecord read(const std::string& path, const RecordedArg& arg) const override { return read_safetensors(path, arg.key); }

 private:
  static std::vector<NamedTensor> named(const std::vector<PhaseTensor>& tensors) {
    std::vector<NamedTensor> out;
    out.reserve(tensors.size());
    for (const PhaseTensor& t : tensors) out.push_back({t.key, t.meta.view()});
    return out;
  }
};

}  // namespace

const TensorFormat& safetensors_format() {
  static const SafetensorsFormat format;
  return format;
}

}  // namespace detail

}  // namespace mate::dump
