// Python values as MATE's log arguments (mate/log/arg.hpp), and back, for the decorator
// (mate.api_logging) and the replay of Python calls.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "mate/log/arg.hpp"

namespace mate::python {

// One argument as the C++ instrumentation would record it: a torch tensor or numpy array as a
// tensor (metadata only, from data_ptr/shape/strides/dtype/device: DLPack export refuses bool,
// tensors that require grad and read-only arrays), bool, int (i64, or u64 above it), float (f64),
// str, None, torch.dtype (a string of type "torch.dtype"), enum.Enum (an enum: its value and
// "Class.MEMBER"), list/tuple/dict of these (a list; a dict's items are named by their keys).
// Anything else is recorded as its repr(), of type "object:<type name>".
log::Arg to_arg(pybind11::handle value, std::string name);

// A recorded non-tensor argument as the Python value the call had (the inverse of to_arg for
// everything but tensors, which replay rebuilds). A tensor inside a list cannot be rebuilt:
// throws std::runtime_error naming it.
pybind11::object from_arg(const log::Arg& arg);

}  // namespace mate::python
