// What every one-file-per-tensor format shares (one_file_per_tensor_format.hpp).
#include "one_file_per_tensor_format.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "file_io.hpp"

namespace mate::dump::detail {

void OneFilePerTensorFormat::place(std::string_view phase, std::vector<PhaseTensor>& tensors) const {
  for (PhaseTensor& t : tensors) t.file = std::string(phase) + "/" + t.stem + std::string(extension());
}

std::uint64_t OneFilePerTensorFormat::estimate_size(const std::vector<PhaseTensor>& tensors) const {
  std::uint64_t total = 0;
  for (const PhaseTensor& t : tensors) total += file_size(t.meta.view());
  return total;
}

std::string OneFilePerTensorFormat::write(const std::string& call_dir, std::vector<PhaseTensor>& tensors,
                                          std::uint64_t& written) const {
  if (tensors.empty()) return "";
  const std::string phase_dir = call_dir + "/" + tensors.front().file.substr(0, tensors.front().file.find('/'));
  if (::mkdir(phase_dir.c_str(), 0700) != 0) return "cannot create " + phase_dir + ": " + std::strerror(errno);
  for (PhaseTensor& t : tensors) {
    const WriteResult r = write_file(call_dir + "/" + t.file, t.meta.view());
    written += r.bytes;
    if (r.read_failed) t.read_error = r.error;
    else if (!r.ok()) return r.error;
  }
  return sync_directory(phase_dir);
}

}  // namespace mate::dump::detail
