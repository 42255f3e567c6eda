// torch.save files written with archive options (tests force ZIP64 on small tensors). Private to
// the dump component; the public functions are in mate/dump/tensor_file.hpp.
#pragma once

#include <string>

#include "mate/dump/tensor_file.hpp"
#include "zip_archive.hpp"

namespace mate::dump::detail {

WriteResult write_torch_save(const std::string& path, const tensor::TensorView& t, const ReadOptions& options,
                             ZipOptions zip_options);
std::uint64_t torch_save_file_size(const tensor::TensorView& t, ZipOptions zip_options);

}  // namespace mate::dump::detail
