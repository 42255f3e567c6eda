// The pickle of one tensor in a torch.save archive (`<archive>/data.pkl`): writing it, and
// reading it back. Private to the dump component.
//
// What torch.save writes for a tensor (pickle protocol 2):
//   torch._utils._rebuild_tensor_v2(
//       <persistent id ('storage', torch.<Type>Storage, '<key>', '<location>', <numel>)>,
//       <storage offset>, (<size>...), (<stride>...), False, collections.OrderedDict())
// The writer emits exactly that, with no other global: every one of them is on the allowlist of
// torch.load(weights_only=True) (torch 1.13 and 2.x). The reader accepts that program as
// torch.save writes it (memo opcodes, protocols 2 to 5, a trailing metadata argument that is
// empty) and nothing else: any other global or shape of pickle is a PickleError saying what.
// The reader is bounded: it never allocates more than a small multiple of its input.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mate::dump::detail {

struct PickleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PickledTensor {
  std::string storage_type;  // "FloatStorage", "BFloat16Storage", ...: torch.<storage_type>
  std::string key = "0";     // its record: <archive>/data/<key>
  std::string location = "cpu";
  std::uint64_t storage_numel = 0;  // elements of the storage
  std::int64_t storage_offset = 0;  // elements
  std::vector<std::int64_t> size;
  std::vector<std::int64_t> stride;  // elements
};

std::string pickle_tensor(const PickledTensor& t);
// Throws PickleError.
PickledTensor unpickle_tensor(std::string_view pickle);

// torch's legacy storage class for a DLPack dtype ("FloatStorage"), or nullopt when torch 1.13
// has none (fp8, unsigned 16/32/64-bit, vectors, other codes).
std::optional<std::string> torch_storage_type(DLDataType t);
// The inverse, for the storage types above; nullopt for others.
std::optional<DLDataType> dtype_of_storage_type(std::string_view storage_type);

}  // namespace mate::dump::detail
