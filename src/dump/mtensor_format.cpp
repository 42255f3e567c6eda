// The default `.mtensor` format (docs/reference/dump-format.md): one file per tensor holding the
// bytes it touches, exactly as they lie in memory, after a JSON header with its layout.

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "file_io.hpp"
#include "json_numbers.hpp"
#include "mate/dump/tensor_file.hpp"
#include "one_file_per_tensor_format.hpp"

namespace mate::dump {

namespace {

using json = nlohmann::json;

constexpr std::size_t kDataAlignment = 64;  // the data starts at a multiple of 64 in the file

json layout_header(const tensor::TensorView& t) {
  const DLDataType d = t.dtype();
  const tensor::ByteExtent e = t.extent();
  return json{{"format", "mate-tensor"},
              {"version", kTensorFormatVersion},
              {"dtype", tensor::dtype_name(d)},
              {"dlpack_dtype", {{"code", d.code}, {"bits", d.bits}, {"lanes", d.lanes}}},
              {"shape", t.shape()},
              {"strides", t.strides()},
              {"byte_offset", t.byte_offset()},
              {"device", tensor::device_name(t.device())},
              {"device_type", static_cast<int>(t.device().device_type)},
              {"device_id", t.device().device_id},
              {"data_begin", e.begin},
              {"nbytes", e.size()}};
}

// The 16-byte prefix and the JSON header padded with spaces so the data is 64-byte aligned.
std::string file_prefix(const tensor::TensorView& t) {
  std::string header = layout_header(t).dump();
  const std::size_t total = 16 + header.size();
  header.append((kDataAlignment - total % kDataAlignment) % kDataAlignment, ' ');
  std::string out(kTensorMagic, sizeof kTensorMagic);
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header;
}

bool file_sink(void* context, const void* data, std::size_t bytes) {
  return static_cast<detail::NewFile*>(context)->write(data, bytes);
}

std::uint64_t read_u64le(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

std::uint64_t mtensor_file_size(const tensor::TensorView& t) {
  return file_prefix(t).size() + static_cast<std::uint64_t>(t.extent().size());
}

WriteResult write_mtensor(const std::string& path, const tensor::TensorView& t, const ReadOptions& options) {
  WriteResult r;
  detail::NewFile file(path);
  const std::string prefix = file_prefix(t);
  if (file.write(prefix.data(), prefix.size())) {
    std::string error = tensor::copy_extent_out(t, file_sink, &file, options);
    if (!error.empty() && file.ok()) {
      r.error = error;
      r.read_failed = true;
    }
  }
  if (r.error.empty() && !file.commit()) r.error = file.error();
  if (!r.error.empty() && !file.error().empty()) r.error = file.error();
  r.bytes = file.written();
  return r;
}

namespace {

// The prefix's header length, checked against the file's size.
std::uint64_t mtensor_header_length(std::string_view prefix, std::uint64_t file_size, std::string_view what) {
  auto bad = [&](const std::string& why) { return DumpError(std::string(what) + ": " + why); };
  if (file_size < 16 || prefix.size() < 16) throw bad("truncated: " + std::to_string(file_size) + " bytes, shorter than the 16-byte prefix");
  if (std::memcmp(prefix.data(), kTensorMagic, 8) != 0) throw bad("not a MATE tensor file (magic is not MATETNSR)");
  const std::uint64_t header_len = read_u64le(prefix.data() + 8);
  if (header_len > kMaxHeaderBytes) throw bad("header length " + std::to_string(header_len) + " exceeds the limit of " + std::to_string(kMaxHeaderBytes));
  if (header_len > file_size - 16) throw bad("truncated: header of " + std::to_string(header_len) + " bytes, file has " + std::to_string(file_size - 16) + " after the prefix");
  return header_len;
}

// The layout in `head` (the prefix and the whole header) of a file of `file_size` bytes whose
// data then starts at `data_at`; every number checked, the data's size against the file's.
TensorRecord parse_mtensor_layout(std::string_view head, std::uint64_t file_size, std::string_view what, std::uint64_t& data_at) {
  auto bad = [&](const std::string& why) { return DumpError(std::string(what) + ": " + why); };
  const std::uint64_t header_len = mtensor_header_length(head, file_size, what);
  json h = json::parse(head.substr(16, header_len), nullptr, false);
  if (h.is_discarded() || !h.is_object()) throw bad("header is not a JSON object");
  TensorRecord r;
  try {
    if (h.at("format").get<std::string>() != "mate-tensor") throw bad("header format is not \"mate-tensor\"");
    const int version = detail::integer_at<int>(h, "version");
    if (version != kTensorFormatVersion) throw bad("unsupported version " + std::to_string(version) + " (this reader reads 1)");
    const json& d = h.at("dlpack_dtype");
    const int code = detail::integer_at<int>(d, "code"), bits = detail::integer_at<int>(d, "bits"),
              lanes = detail::integer_at<int>(d, "lanes");
    if (code < 0 || code > 255 || bits <= 0 || bits > 255 || lanes <= 0 || lanes > 65535) throw bad("invalid dlpack_dtype");
    r.dtype = DLDataType{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits), static_cast<std::uint16_t>(lanes)};
    r.shape = detail::integer_list_at<std::int64_t>(h, "shape");
    r.strides = detail::integer_list_at<std::int64_t>(h, "strides");
    r.byte_offset = detail::integer_at<std::uint64_t>(h, "byte_offset");
    r.device.device_type = static_cast<DLDeviceType>(detail::integer_at<int>(h, "device_type"));
    r.device.device_id = detail::integer_at<int>(h, "device_id");
    r.data_begin = detail::integer_at<std::int64_t>(h, "data_begin");
    const std::int64_t nbytes = detail::integer_at<std::int64_t>(h, "nbytes");
    if (r.shape.size() != r.strides.size()) throw bad("shape and strides have different lengths");
    if (static_cast<int>(r.shape.size()) > kMaxRank) throw bad("rank " + std::to_string(r.shape.size()) + " exceeds " + std::to_string(kMaxRank));
    // The extent the layout implies must be exactly what the file stores (TensorView::layout():
    // the one place that turns a layout into bytes, packed sub-byte types included).
    DLTensor t{};
    t.dtype = r.dtype;
    t.ndim = static_cast<std::int32_t>(r.shape.size());
    t.shape = r.shape.data();
    t.strides = r.strides.data();
    const tensor::Layout layout = tensor::TensorView(t).layout();
    if (layout.error != nullptr) throw bad(layout.error);
    const std::int64_t lo = layout.extent.begin, extent = layout.extent.size();
    if (r.data_begin != lo || nbytes != extent)
      throw bad("stored byte range (data_begin " + std::to_string(r.data_begin) + ", nbytes " + std::to_string(nbytes) +
                ") does not match the layout (" + std::to_string(lo) + ", " + std::to_string(extent) + ")");
    data_at = 16 + header_len;
    if (file_size - data_at != static_cast<std::uint64_t>(nbytes))
      throw bad(file_size - data_at < static_cast<std::uint64_t>(nbytes)
                    ? "truncated: " + std::to_string(file_size - data_at) + " of " + std::to_string(nbytes) + " data bytes"
                    : "trailing bytes after the data");
  } catch (const detail::FieldError& e) {
    throw bad(std::string("invalid header: ") + e.what());
  } catch (const json::exception& e) {
    throw bad(std::string("invalid header: ") + e.what());
  }
  return r;
}

}  // namespace

TensorRecord parse_mtensor(std::string_view bytes, std::string_view what) {
  std::uint64_t data_at = 0;
  TensorRecord r = parse_mtensor_layout(bytes, bytes.size(), what, data_at);
  r.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_at), bytes.end());
  return r;
}

// Reads the header first, then exactly the data it describes (checked against the file's size):
// the bytes are read once, straight into the record.
TensorRecord read_mtensor(const std::string& path) {
  const detail::DumpFile file(path);
  const std::string prefix = file.read_string(0, static_cast<std::size_t>(std::min<std::uint64_t>(file.size(), 16)));
  const std::uint64_t header_len = mtensor_header_length(prefix, file.size(), path);
  const std::string head = prefix + file.read_string(16, static_cast<std::size_t>(header_len));
  std::uint64_t data_at = 0;
  TensorRecord r = parse_mtensor_layout(head, file.size(), path, data_at);
  r.data = detail::data_buffer(file.size() - data_at, path);
  file.read_at(data_at, r.data.data(), r.data.size());
  return r;
}

namespace detail {

namespace {

class MtensorFormat final : public OneFilePerTensorFormat {
 public:
  std::string_view name() const noexcept override { return "mate"; }
  bool keeps_layout() const noexcept override { return true; }
  TensorRecord read(const std::string& path, const RecordedArg& /*arg*/) const override { return read_mtensor(path); }

 protected:
  std::string_view extension() const noexcept override { return ".mtensor"; }
  std::uint64_t file_size(const tensor::TensorView& t) const override { return mtensor_file_size(t); }
  WriteResult write_file(const std::string& path, const tensor::TensorView& t) const override { return write_mtensor(path, t); }
};

}  // namespace

const TensorFormat& mtensor_format() {
  static const MtensorFormat format;
  return format;
}

}  // namespace detail

}  // namespace mate::dump
