// mate/dump/tensor_file.hpp — the tensor files of level-10 dumps: writing and reading them.
//
// Two formats (docs/reference/dump-format.md specifies both byte by byte):
//  * MATE's default `.mtensor` file, one tensor per file: an 8-byte magic, a little-endian
//    header length, a JSON header (dtype, shape, strides, byte offset, device, where the stored
//    bytes start), then the bytes the tensor touches, exactly as they lie in memory. Strides,
//    storage offset and gaps are preserved, so replay rebuilds the exact layout.
//  * safetensors (MATE_DUMP_SAFETENSORS=1), one file per call phase: contiguous copies, the
//    original layout kept only as text in `__metadata__`.
//
// Writers read device memory through a device::Backend in bounded chunks and never throw. A file
// appears under its name only complete: it is written to `.<name>.tmp.<pid>` in the same
// directory, fsynced and renamed into place, so a crash leaves at most that temporary. A failure
// (full disk, file-size limit, unreadable memory) comes back as an error message and removes the
// temporary. Readers never trust their input: every length, count and offset is
// checked, and damage is a DumpError naming the file and what is wrong with it.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "mate/device/backend.hpp"
#include "mate/tensor/tensor_view.hpp"

namespace mate::dump {

// A damaged or unreadable dump file or directory.
class DumpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr char kTensorMagic[8] = {'M', 'A', 'T', 'E', 'T', 'N', 'S', 'R'};
inline constexpr int kTensorFormatVersion = 1;
// Largest header a reader accepts (a header describes one tensor; real ones are < 1 KiB).
inline constexpr std::uint64_t kMaxHeaderBytes = 1 << 20;
// Largest rank a reader accepts.
inline constexpr int kMaxRank = 64;

// Bytes read from a device per backend read() when dumping (the host staging buffer).
inline constexpr std::size_t kDefaultChunkBytes = std::size_t{4} << 20;

// A tensor read back from a dump: its layout and the bytes it touches.
struct TensorRecord {
  DLDataType dtype{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements
  std::uint64_t byte_offset = 0;      // DLTensor::byte_offset of the original
  DLDevice device{kDLCPU, 0};
  // Offset of data[0] relative to element (0, ..., 0), in bytes (<= 0; < 0 with negative strides).
  std::int64_t data_begin = 0;
  std::vector<std::uint8_t> data;  // the touched bytes: [origin + data_begin, origin + data_begin + size)

  // A DLTensor over `base`, which holds `data` (base must stay alive): data points to
  // base - data_begin - byte_offset so that data + byte_offset is element (0, ..., 0).
  DLTensor view_over(std::uintptr_t base) const;
};

struct WriteResult {
  std::uint64_t bytes = 0;  // bytes written to disk
  std::string error;        // empty on success
  bool read_failed = false; // the tensor's memory could not be read (the file system was fine)
  bool ok() const noexcept { return error.empty(); }
};

// Where tensor memory is read from: host memory directly, device memory through this backend.
// nullptr: the backend registered with mate::tensor::set_device_backend (or none).
struct ReadOptions {
  device::Backend* backend = nullptr;
  std::size_t chunk_bytes = kDefaultChunkBytes;
};

// The size a `.mtensor` file of `t` will have (header included).
std::uint64_t mtensor_file_size(const tensor::TensorView& t);

// Writes `t` to a new file `path` (mode 0600; an existing `path` is an error, never replaced) in
// the default format.
WriteResult write_mtensor(const std::string& path, const tensor::TensorView& t, const ReadOptions& options = {});

// Parses a `.mtensor` file's content. Throws DumpError (the message names `what`).
TensorRecord parse_mtensor(std::string_view bytes, std::string_view what = "tensor file");
TensorRecord read_mtensor(const std::string& path);

// safetensors: one file holding several named tensors as contiguous copies.
struct NamedTensor {
  std::string key;
  tensor::TensorView view;
};
// The safetensors dtype name ("F32", "BF16", "F8_E4M3", ...) or "" when it has none.
std::string safetensors_dtype(DLDataType t);
std::uint64_t safetensors_file_size(const std::vector<NamedTensor>& tensors);
WriteResult write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                              const ReadOptions& options = {});
// Parses a safetensors file and returns the tensor `key` (contiguous strides; device and
// original strides from MATE's `__metadata__` entries when present). Throws DumpError.
TensorRecord parse_safetensors(std::string_view bytes, std::string_view key, std::string_view what = "safetensors file");
TensorRecord read_safetensors(const std::string& path, std::string_view key);

// Copies the bytes of `t`'s extent ([origin + extent.begin, origin + extent.end)) to `sink` in
// pieces of at most options.chunk_bytes. Returns "" or what failed.
using ByteSink = bool (*)(void* context, const void* data, std::size_t bytes);
std::string copy_extent(const tensor::TensorView& t, const ReadOptions& options, ByteSink sink, void* context);

// Reads all of `t`'s extent to host memory (chunked for device memory). Throws DumpError.
std::vector<std::uint8_t> read_extent(const tensor::TensorView& t, const ReadOptions& options = {});

}  // namespace mate::dump
