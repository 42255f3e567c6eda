// Argument checks shared by the reference kernels' API functions. Every failure is an
// ArgumentError worded "mate::ops::<function>: argument '<name>': <what is wrong> (<what is
// accepted>)".
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "mate/ops/modules.hpp"
#include "mate/tensor/dtype.hpp"

namespace mate::ops::detail {

// Where a call's tensors live, once all of them agree.
struct Placement {
  tensor::Memory memory = tensor::Memory::Host;
  DLDevice device{kDLCPU, 0};
};

class Checker {
 public:
  explicit Checker(const char* function) : function_(function) {}

  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void fail(const char* arg, const std::string& message) const;

  // Not null; `ndim` dimensions; row-major contiguous; data aligned to the element size and not
  // null when there are elements; on the same device as the tensors checked before.
  const DLTensor& tensor(const char* arg, const DLTensor* t, int ndim);
  // The dtype is one of `accepted`.
  void dtype(const char* arg, const DLTensor& t, std::initializer_list<tensor::ScalarType> accepted) const;
  // `t`'s dtype equals `like`'s.
  void same_dtype(const char* arg, const DLTensor& t, const char* like_arg, const DLTensor& like) const;
  // t.shape[dim] == expected (described as `what`, e.g. "k of 'a'").
  void dim(const char* arg, const DLTensor& t, int dim, std::int64_t expected, const std::string& what) const;
  // The output's bytes do not overlap the input's.
  void no_overlap(const char* out_arg, const DLTensor& out, const char* in_arg, const DLTensor& in) const;

  // The common device of every tensor checked; an ArgumentError for devices without kernels.
  Placement placement() const;
  // f32 -> F32, bf16 -> BF16 (after dtype() accepted one of them).
  static InputType input_type(const DLTensor& t);

 private:
  const char* function_;
  bool have_device_ = false;
  const char* first_arg_ = nullptr;
  DLDevice device_{kDLCPU, 0};
};

// A checked tensor's first element (data + byte_offset), typed as its kernel takes it.
template <class T>
T* first_element(const DLTensor& t) {
  return static_cast<T*>(static_cast<void*>(static_cast<char*>(t.data) + t.byte_offset));
}

}  // namespace mate::ops::detail
