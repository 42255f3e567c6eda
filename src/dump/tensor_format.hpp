// The tensor formats of level-10 dumps behind one interface (private to the dump component).
//
// The writer (writer.cpp) keeps what every format shares: caps, the call directory's layout,
// publishing call.json only once the files it names are complete. A format decides where each
// tensor of a phase goes, how large its files will be, how to write them complete under their
// names, and how to read one tensor back. Adding a format is one file implementing TensorFormat
// (or OneFilePerTensorFormat, one_file_per_tensor_format.hpp, for a file per tensor) plus its
// line in tensor_formats.cpp; MATE_DUMP_* settings choose it in the writer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mate/dump/call_record.hpp"
#include "mate/dump/tensor_file.hpp"
#include "mate/tensor/tensor_view.hpp"

namespace mate::dump::detail {

// One tensor argument of a call phase ("inputs" or "outputs") to store.
struct PhaseTensor {
  std::string stem;         // unique in the phase: "00_a", "01_list.2" (argument index and name)
  tensor::TensorMeta meta;  // the tensor; its memory is read while writing
  std::string file;         // set by place(): its file, relative to the call directory
  std::string key;          // set by place(): its key in `file`, for formats holding several
  std::string read_error;   // set by write(): the tensor's memory could not be read (not saved)
};

class TensorFormat {
 public:
  virtual ~TensorFormat() = default;
  // call.json's "tensor_format".
  virtual std::string_view name() const noexcept = 0;
  // Whether a stored tensor holds exactly the bytes of its recorded address range, in their
  // layout: replay then rebuilds tensors that overlapped over one buffer again.
  virtual bool keeps_layout() const noexcept = 0;
  // Chooses file (and key) for each tensor of `phase`.
  virtual void place(std::string_view phase, std::vector<PhaseTensor>& tensors) const = 0;
  // The bytes the files of `tensors` will take on disk.
  virtual std::uint64_t estimate_size(const std::vector<PhaseTensor>& tensors) const = 0;
  // Writes the files under `call_dir` (creating any subdirectory it needs, mode 0700), each
  // complete under its name, and fsyncs the subdirectories it wrote into. Adds the bytes written
  // to `written`. Memory that cannot be read is recorded in the tensor's read_error; a
  // file-system error is returned ("" on success).
  virtual std::string write(const std::string& call_dir, std::vector<PhaseTensor>& tensors,
                            std::uint64_t& written) const = 0;
  // Reads the tensor of argument `arg` (call.json's record of it: its key, its layout) stored in
  // `path`. Throws DumpError.
  virtual TensorRecord read(const std::string& path, const RecordedArg& arg) const = 0;
};

// The formats (tensor_formats.cpp).
const TensorFormat& torch_save_format();   // "torch_save": one .pt file per tensor (default), exact layout
const TensorFormat& mtensor_format();      // "mate": one .mtensor file per tensor, exact layout (earlier default)
const TensorFormat& safetensors_format();  // "safetensors": one file per phase, contiguous copies
// The format call.json names `name`, or nullptr.
const TensorFormat* tensor_format_named(std::string_view name) noexcept;
// "torch_save, mate, safetensors": for messages.
std::string tensor_format_names();

}  // namespace mate::dump::detail
