// The formats that store each tensor of a phase in a file of its own, <phase>/<stem><extension>
// (torch.save's .pt, the earlier .mtensor): where the files go, their size and writing them
// complete, once for all of them. A format says only how one tensor's file looks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mate/dump/tensor_file.hpp"
#include "tensor_format.hpp"

namespace mate::dump::detail {

class OneFilePerTensorFormat : public TensorFormat {
 public:
  void place(std::string_view phase, std::vector<PhaseTensor>& tensors) const final;
  std::uint64_t estimate_size(const std::vector<PhaseTensor>& tensors) const final;
  // Every file of a phase is in one subdirectory, inputs/ or outputs/, created here.
  std::string write(const std::string& call_dir, std::vector<PhaseTensor>& tensors, std::uint64_t& written) const final;

 protected:
  // ".pt", ".mtensor".
  virtual std::string_view extension() const noexcept = 0;
  // The bytes write_file will put on disk for `t`.
  virtual std::uint64_t file_size(const tensor::TensorView& t) const = 0;
  // Writes `t`'s file complete under `path`.
  virtual WriteResult write_file(const std::string& path, const tensor::TensorView& t) const = 0;
};

}  // namespace mate::dump::detail
