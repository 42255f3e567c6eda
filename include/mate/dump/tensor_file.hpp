// mate/dump/tensor_file.hpp — the tensor files of level-10 dumps: writing and reading them.
//
// Three formats (docs/reference/dump-format.md specifies them byte by byte):
//  * the default `.pt` file, one tensor per file, in torch.save's zip format: `torch.load` opens it
//    (weights_only=True too) and gets the tensor with its dtype, shape and strides; the stored
//    bytes are exactly those the tensor touches. A dtype or layout torch cannot express (fp8,
//    unsigned 16/32/64-bit, negative strides) is stored as a 1-D uint8 tensor of those bytes, its
//    true layout in call.json.
//  * the earlier default `.mtensor` file (still read), one tensor per file: an 8-byte magic, a little-endian
//    header length, a JSON header (dtype, shape, strides, byte offset, device, where the stored
//    bytes start), then the bytes the tensor touches, exactly as they lie in memory. Strides,
//    storage offset and gaps are preserved, so replay rebuilds the exact layout.
//  * safetensors (MATE_DUMP_SAFETENSORS=1), one file per call phase: contiguous copies, the
//    original layout kept only as text in `__metadata__`.
//
// The dump writer reaches both through one interface (src/dump/tensor_format.hpp); these are the
// formats' own functions, for tools and tests. Writers read device memory through a
// device::Backend in bounded chunks (mate/tensor/memory.hpp) and never throw. A file
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
#include "mate/tensor/memory.hpp"
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

// A tensor read back from a dump: its layout and the bytes it touches
// ([origin + data_begin, origin + data_begin + data.size())). view_over(base) views `data`
// placed at `base` as the tensor again (mate/tensor/memory.hpp).
struct TensorRecord : tensor::StoredLayout {
  std::vector<std::uint8_t> data;
};

struct WriteResult {
  std::uint64_t bytes = 0;  // bytes written to disk
  std::string error;        // empty on success
  bool read_failed = false; // the tensor's memory could not be read (the file system was fine)
  bool ok() const noexcept { return error.empty(); }
};

// Tensor memory is read through mate/tensor/memory.hpp: host memory directly, device memory
// through options.backend or the backend serving the tensor's device, in bounded chunks.
using ReadOptions = tensor::CopyOptions;

// The size a `.mtensor` file of `t` will have (header included).
std::uint64_t mtensor_file_size(const tensor::TensorView& t);

// Writes `t` to a new file `path` (mode 0600; an existing `path` is an error, never replaced) in
// the default format.
WriteResult write_mtensor(const std::string& path, const tensor::TensorView& t, const ReadOptions& options = {});

// Parses a `.mtensor` file's content. Throws DumpError (the message names `what`).
TensorRecord parse_mtensor(std::string_view bytes, std::string_view what = "tensor file");
TensorRecord read_mtensor(const std::string& path);

// torch.save's format (`.pt`): the size of the file for `t`, and writing it to a new file `path`.
std::uint64_t torch_save_file_size(const tensor::TensorView& t);
WriteResult write_torch_save(const std::string& path, const tensor::TensorView& t, const ReadOptions& options = {});
// Whether a `.pt` file stores `t` as a torch tensor of its own dtype and strides (else as raw
// bytes, a 1-D uint8 tensor of its extent).
bool torch_expresses(const tensor::TensorView& t);
// Reads a torch.save file holding one tensor (MATE's, or torch.save's of one CPU tensor): its
// layout as the pickle gives it (device from the storage's location, byte_offset 0) and the bytes
// it touches. A raw-bytes file reads as the uint8 tensor it is. Throws DumpError.
TensorRecord parse_torch_save(std::string_view bytes, std::string_view what = "torch.save file");
TensorRecord read_torch_save(const std::string& path);
// A tensor of a dump read from its `.pt` file with the layout call.json recorded for it
// (`recorded`): a raw-bytes file becomes the recorded dtype, shape and strides again; byte offset
// and device are the recorded ones. Throws DumpError when the file does not hold that tensor.
TensorRecord with_recorded_layout(TensorRecord stored, const tensor::TensorView& recorded, std::string_view what);

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

}  // namespace mate::dump
