// The default `.pt` format (docs/reference/dump-format.md): one tensor per file in torch.save's
// zip layout, readable by torch.load (1.13 and 2.x, weights_only=True included), holding exactly
// the bytes the tensor touches. Written by MATE (no libtorch): a STORED zip (zip_archive.hpp)
// around a protocol-2 pickle (torch_pickle.hpp).

#include <cstring>

#include "file_io.hpp"
#include "json_numbers.hpp"
#include "mate/dump/tensor_file.hpp"
#include "mate/tensor/dtype.hpp"
#include "one_file_per_tensor_format.hpp"
#include "torch_pickle.hpp"
#include "torch_save.hpp"
#include "zip_archive.hpp"

namespace mate::dump {

namespace {

// The archive's folder; torch.save names it after the file, torch.load accepts any name.
constexpr const char* kArchive = "archive/";
constexpr const char* kDataRecord = "archive/data/0";
// Records torch 2.x writes beside data.pkl and the storage, in its order.
constexpr std::pair<const char*, const char*> kRecordsBefore[] = {
    {"archive/.format_version", "1"}, {"archive/.storage_alignment", "64"}, {"archive/byteorder", "little"}};
constexpr std::pair<const char*, const char*> kVersionRecord = {"archive/version", "3\n"};
constexpr const char* kSerializationId = "archive/.data/serialization_id";
constexpr std::size_t kSerializationIdDigits = 40;

// The pickle and the stored byte count for `t`: its own dtype and strides when torch has them,
// else (raw) a 1-D uint8 tensor of its extent's bytes.
struct Plan {
  detail::PickledTensor pickle;
  std::uint64_t nbytes = 0;
};

Plan plan_for(const tensor::TensorView& t) {
  Plan p;
  const tensor::ByteExtent e = t.extent();
  p.nbytes = static_cast<std::uint64_t>(e.size());
  if (torch_expresses(t)) {
    const std::int64_t es = static_cast<std::int64_t>(t.element_size());
    p.pickle.storage_type = *detail::torch_storage_type(t.dtype());
    p.pickle.storage_numel = p.nbytes / static_cast<std::uint64_t>(es);
    p.pickle.storage_offset = -e.begin / es;  // 0: strides are >= 0
    p.pickle.size = t.shape();
    p.pickle.stride = t.strides();
  } else {
    p.pickle.storage_type = "ByteStorage";
    p.pickle.storage_numel = p.nbytes;
    p.pickle.size = {static_cast<std::int64_t>(p.nbytes)};
    p.pickle.stride = {1};
  }
  return p;
}

std::vector<std::pair<std::size_t, std::uint64_t>> entry_sizes(const Plan& p, std::size_t pickle_size) {
  std::vector<std::pair<std::size_t, std::uint64_t>> out = {{std::strlen(kArchive) + 8, pickle_size}};
  for (const auto& [name, text] : kRecordsBefore) out.emplace_back(std::strlen(name), std::strlen(text));
  out.emplace_back(std::strlen(kDataRecord), p.nbytes);
  out.emplace_back(std::strlen(kVersionRecord.first), std::strlen(kVersionRecord.second));
  out.emplace_back(std::strlen(kSerializationId), kSerializationIdDigits);
  return out;
}

struct FileOutput final : detail::ZipOutput {
  explicit FileOutput(detail::NewFile& f) : file(f) {}
  bool append(const void* data, std::size_t bytes) override { return file.write(data, bytes); }
  bool overwrite(std::uint64_t offset, const void* data, std::size_t bytes) override { return file.write_at(offset, data, bytes); }
  detail::NewFile& file;
};

bool zip_sink(void* context, const void* data, std::size_t bytes) {
  return static_cast<detail::ZipWriter*>(context)->append(data, bytes);
}

std::string padded(std::uint64_t v) {
  std::string s = std::to_string(v);
  return std::string(20 - s.size(), '0') + s;
}

std::string dims(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

bool torch_expresses(const tensor::TensorView& t) {
  if (!detail::torch_storage_type(t.dtype())) return false;
  for (std::int64_t s : t.strides())
    if (s < 0) return false;
  return true;
}

std::uint64_t torch_save_file_size(const tensor::TensorView& t) { return detail::torch_save_file_size(t, {}); }

WriteResult write_torch_save(const std::string& path, const tensor::TensorView& t, const ReadOptions& options) {
  return detail::write_torch_save(path, t, options, {});
}

namespace detail {

std::uint64_t torch_save_file_size(const tensor::TensorView& t, ZipOptions zip_options) {
  const Plan p = plan_for(t);
  return ZipWriter::archive_size(entry_sizes(p, pickle_tensor(p.pickle).size()), zip_options);
}

WriteResult write_torch_save(const std::string& path, const tensor::TensorView& t, const ReadOptions& options,
                             ZipOptions zip_options) {
  WriteResult r;
  const Plan p = plan_for(t);
  const std::string pickle = pickle_tensor(p.pickle);
  NewFile file(path);
  FileOutput out(file);
  ZipWriter zip(out, zip_options);
  bool ok = zip.add(std::string(kArchive) + "data.pkl", pickle);
  const std::uint32_t pickle_crc = zip.last_crc();
  for (const auto& [name, text] : kRecordsBefore) ok = ok && zip.add(name, text);
  ok = ok && zip.begin(kDataRecord, p.nbytes);
  if (ok && p.nbytes > 0) {
    const std::string error = tensor::copy_extent_out(t, zip_sink, &zip, options);
    if (!error.empty()) {
      ok = false;
      if (file.ok()) {
        r.error = error;
        r.read_failed = true;
      }
    }
  }
  ok = ok && zip.end();
  // Like torch's: unique enough per content (record names are fixed here, so the two CRCs).
  const std::string id = padded(pickle_crc) + padded(zip.last_crc());
  ok = ok && zip.add(kVersionRecord.first, kVersionRecord.second) && zip.add(kSerializationId, id) && zip.finish();
  if (ok && !file.commit()) ok = false;
  if (!ok && r.error.empty()) r.error = file.error().empty() ? "write " + path + ": the zip archive could not be written" : file.error();
  r.bytes = file.written();
  return r;
}

}  // namespace detail

namespace {

// The tensor in the archive `source` (named `what` in errors).
TensorRecord read_archive(detail::ZipSource source, std::string_view what) {
  auto bad = [&](const std::string& why) { return DumpError(std::string(what) + ": " + why); };
  try {
    const detail::ZipReader zip(std::move(source));
    // <archive>/data.pkl, <archive> being a folder name (torch.save: the file's stem).
    const detail::ZipEntry* pkl = nullptr;
    for (const detail::ZipEntry& e : zip.entries()) {
      const std::size_t slash = e.name.find('/');
      if (slash != std::string::npos && slash > 0 && e.name.substr(slash) == "/data.pkl") pkl = &e;
    }
    if (pkl == nullptr) throw bad("not a torch.save archive (no <archive>/data.pkl entry)");
    const std::string archive = pkl->name.substr(0, pkl->name.find('/') + 1);
    if (const detail::ZipEntry* order = zip.find(archive + "byteorder")) {
      const std::string text = zip.read_all(*order, 16);
      if (text != "little") throw bad("byteorder is \"" + text + "\"; only little-endian files are read");
    }
    const detail::PickledTensor p = detail::unpickle_tensor(zip.read_all(*pkl, kMaxHeaderBytes));
    TensorRecord r;
    r.dtype = *detail::dtype_of_storage_type(p.storage_type);  // the pickle reader accepts only these
    const std::optional<DLDevice> device = tensor::device_named(p.location);
    if (!device) throw bad("storage location \"" + p.location + "\" is not a device MATE knows");
    r.device = *device;
    r.shape = p.size;
    r.strides = p.stride;
    const std::int64_t es = static_cast<std::int64_t>(tensor::element_size(r.dtype));
    const detail::ZipEntry* data = zip.find(archive + "data/" + p.key);
    if (data == nullptr) throw bad("no storage record data/" + p.key);
    std::int64_t storage_bytes = 0;
    if (detail::mul_overflows(static_cast<std::int64_t>(std::min<std::uint64_t>(p.storage_numel, INT64_MAX)), es, &storage_bytes) ||
        static_cast<std::uint64_t>(storage_bytes) != data->size)
      throw bad("storage record data/" + p.key + " has " + std::to_string(data->size) + " bytes, the pickle says " +
                std::to_string(p.storage_numel) + " elements of " + std::to_string(es));
    // The elements' span around element (0, ..., 0), in bytes; it must lie inside the storage.
    std::int64_t lo = 0, hi = 0;
    bool empty = false;
    for (std::int64_t d : r.shape) {
      if (d < 0) throw bad("negative dimension in size");
      if (d == 0) empty = true;
    }
    if (!empty) {
      for (std::size_t i = 0; i < r.shape.size(); ++i) {
        std::int64_t span = 0;
        if (detail::mul_overflows(r.shape[i] - 1, r.strides[i], &span) || detail::mul_overflows(span, es, &span) ||
            __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
          throw bad("size and stride overflow 64 bits");
      }
      if (__builtin_add_overflow(hi, es, &hi)) throw bad("size and stride overflow 64 bits");
    }
    std::int64_t origin = 0, first = 0, last = 0;
    if (detail::mul_overflows(p.storage_offset, es, &origin) || __builtin_add_overflow(origin, lo, &first) ||
        __builtin_add_overflow(origin, hi, &last) || first < 0 || (!empty && last > storage_bytes) || (empty && origin > storage_bytes))
      throw bad("the tensor (storage offset " + std::to_string(p.storage_offset) + ", size " + dims(r.shape) + ", stride " +
                dims(r.strides) + ") reaches outside its storage of " + std::to_string(p.storage_numel) + " elements");
    r.data_begin = empty ? 0 : lo;
    const std::uint64_t n = empty ? 0 : static_cast<std::uint64_t>(last - first);
    r.data = detail::data_buffer(n, what);
    if (n > 0) zip.read(*data, static_cast<std::uint64_t>(first), r.data.data(), r.data.size());
    return r;
  } catch (const detail::ZipError& e) {
    throw bad(e.what());
  } catch (const detail::PickleError& e) {
    throw bad(e.what());
  }
}

}  // namespace

TensorRecord parse_torch_save(std::string_view bytes, std::string_view what) {
  detail::ZipSource source;
  source.size = bytes.size();
  source.read = [bytes, what](std::uint64_t offset, void* into, std::size_t n) {
    if (offset > bytes.size() || n > bytes.size() - offset) throw DumpError(std::string(what) + ": truncated");
    if (n > 0) std::memcpy(into, bytes.data() + offset, n);  // an empty entry's buffer may be null
  };
  return read_archive(std::move(source), what);
}

TensorRecord read_torch_save(const std::string& path) {
  const detail::DumpFile file(path);
  detail::ZipSource source;
  source.size = file.size();
  source.read = [&file](std::uint64_t offset, void* into, std::size_t n) { file.read_at(offset, into, n); };
  return read_archive(std::move(source), path);
}

TensorRecord with_recorded_layout(TensorRecord stored, const tensor::TensorView& recorded, std::string_view what) {
  auto bad = [&](const std::string& why) { return DumpError(std::string(what) + ": " + why); };
  const auto same = [](DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; };
  const std::string as_recorded = tensor::dtype_name(recorded.dtype()) + " " + dims(recorded.shape()) + " with strides " + dims(recorded.strides());
  if (torch_expresses(recorded)) {
    if (!same(stored.dtype, recorded.dtype()) || stored.shape != recorded.shape() || stored.strides != recorded.strides())
      throw bad("holds a " + tensor::dtype_name(stored.dtype) + " " + dims(stored.shape) + " tensor with strides " + dims(stored.strides) +
                ", call.json records " + as_recorded);
  } else {
    // Raw bytes: the extent of the recorded layout, as a 1-D uint8 tensor.
    const std::uint64_t extent = static_cast<std::uint64_t>(recorded.extent().size());
    if (!same(stored.dtype, DLDataType{kDLUInt, 8, 1}) || stored.shape.size() != 1 || stored.strides != std::vector<std::int64_t>{1} ||
        stored.data.size() != extent)
      throw bad("holds a " + tensor::dtype_name(stored.dtype) + " " + dims(stored.shape) + " tensor; call.json records " + as_recorded +
                ", stored as its " + std::to_string(extent) + " bytes (a 1-D uint8 tensor)");
    stored.dtype = recorded.dtype();
    stored.shape = recorded.shape();
    stored.strides = recorded.strides();
    stored.data_begin = recorded.extent().begin;
  }
  stored.byte_offset = recorded.byte_offset();
  stored.device = recorded.device();
  return stored;
}

namespace detail {

namespace {

class TorchSaveFormat final : public OneFilePerTensorFormat {
 public:
  std::string_view name() const noexcept override { return "torch_save"; }
  bool keeps_layout() const noexcept override { return true; }

  TensorRecord read(const std::string& path, const RecordedArg& arg) const override {
    TensorRecord stored = read_torch_save(path);
    if (!arg.tensor) throw DumpError(path + ": call.json records no layout for " + arg.name);
    return with_recorded_layout(std::move(stored), arg.tensor->view(), path);
  }

 protected:
  std::string_view extension() const noexcept override { return ".pt"; }
  std::uint64_t file_size(const tensor::TensorView& t) const override { return dump::torch_save_file_size(t); }
  WriteResult write_file(const std::string& path, const tensor::TensorView& t) const override {
    return dump::write_torch_save(path, t);
  }
};

}  // namespace

const TensorFormat& torch_save_format() {
  static const TorchSaveFormat format;
  return format;
}

}  // namespace detail

}  // namespace mate::dump
