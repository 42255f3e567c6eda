// mate/replay/replay.hpp — running dumped calls again and comparing their outputs (`mate replay`).
//
// For each call directory (mate/dump/call_record.hpp) whose function passes the filter:
//  1. the function is looked up in the registry (mate/replay/registry.hpp);
//  2. every tensor argument is rebuilt from its input snapshot, on memory from a
//     TensorAllocator, with its original dtype, shape, strides, byte offset and device;
//     arguments whose recorded address ranges overlap (in place, overlapping views) share one
//     buffer covering their union, as they shared memory when the call was made;
//  3. the function runs;
//  4. each argument the dump recorded as an output (outputs and in-place arguments) is compared
//     with its recorded post-call value: shape and dtype exactly, values within
//     |got - expected| <= atol + rtol * |expected| (defaults per dtype, see default_tolerance;
//     NaN matches NaN), or bit for bit with `exact`. Integer and bool values are always compared
//     exactly (never through a double, which rounds i64/u64 above 2^53); tolerances apply only
//     to floating types. A recorded scalar return value is compared the same way.
// A call whose original run never completed (status inputs_saved, raised or failed) is still run
// (that is how a crash is reproduced) and reported as NoReference, never as passed. Damaged
// dumps, unknown functions and argument mismatches are per-call errors with a message.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mate/tensor/dtype.hpp"

namespace mate::replay {

// Memory for rebuilt tensors. The default serves host memory from the heap and device memory
// through the device layer; `mate replay --guard-alloc` plugs the guarded allocator in here.
class TensorAllocator {
 public:
  virtual ~TensorAllocator() = default;
  // `bytes` (> 0) of memory where `device`'s tensors live, or throws std::runtime_error.
  virtual std::uintptr_t allocate(DLDevice device, std::size_t bytes) = 0;
  virtual void deallocate(DLDevice device, std::uintptr_t address, std::size_t bytes) noexcept = 0;
};
TensorAllocator& default_allocator();

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};
// torch.testing.assert_close's defaults: f64 1e-7/1e-7, f32 1.3e-6/1e-5, f16 1e-3/1e-5,
// bf16 1.6e-2/1e-5, fp8 e4m3 1.25e-1/1e-2, fp8 e5m2 2.5e-1/1e-2; integers and bool exact.
Tolerance default_tolerance(tensor::ScalarType t) noexcept;

struct Options {
  std::string filter;           // fnmatch pattern on function names; "" = every call
  std::optional<double> rtol;   // overrides the per-dtype default
  std::optional<double> atol;
  bool exact = false;           // bit-for-bit comparison
  // Replays every CUDA/MUSA tensor on this device ordinal of its kind (a dump of rank 3's
  // cuda:3 on a one-GPU machine: 0); unset: on the device it was recorded on.
  std::optional<int> device;
  TensorAllocator* allocator = nullptr;  // nullptr: default_allocator()
};

enum class Outcome { Passed, Mismatch, NoReference, Error };
const char* to_string(Outcome o) noexcept;

// The comparison of one recorded output.
struct OutputCheck {
  std::string name;
  bool ok = true;
  std::string problem;  // shape/dtype difference, or "" when values were compared
  std::int64_t count = 0;       // elements compared
  std::int64_t mismatched = 0;  // elements outside tolerance
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::vector<std::int64_t> where;  // index of the largest absolute error
  double got = 0, expected = 0;     // values there
  // Integer and bool outputs (always compared exactly): the values there in full, as decimal
  // text, since `got` and `expected` round i64/u64 values above 2^53.
  std::string got_exact, expected_exact;
  // A dtype MATE does not decode (e.g. float8_e8m0fnu, fp4): compared bit for bit with or without
  // --exact; got_exact / expected_exact then hold the first differing element's bits in hex, and
  // the errors are not computed.
  bool compared_bits = false;
};

struct CallResult {
  std::string dir;
  std::string function;  // "" when call.json could not be read
  std::uint64_t seq = 0;
  Outcome outcome = Outcome::Error;
  std::string message;  // one line: why not passed
  std::vector<OutputCheck> outputs;
};

// Reports each call as it is replayed, so that a caller sees results as they come and, when a
// replayed call crashes the process, which call it was.
struct Progress {
  // Just before a call is replayed: its directory and function ("" when call.json is unreadable).
  std::function<void(const std::string& dir, const std::string& function)> starting;
  // Once it is done, with its result.
  std::function<void(const CallResult&)> finished;
};

// While replaying, the replayed calls go through their MATE_API instrumentation again. The
// functions below cap MATE_LOGLEVEL at 5 for as long as they run: at level 10 the replay would
// dump the calls it replays (into the dump being replayed when MATE_DUMP_DIR points at it).

// Replays one call directory.
CallResult replay_call(const std::string& dir, const Options& options = {});
// Replays `path` (one call directory, or every call directory under it, in call order), skipping
// calls whose function does not match options.filter, and reports each call to `progress` as it
// goes. Returns the number of calls replayed. Throws dump::DumpError when `path` is not a
// directory.
std::size_t replay_each(const std::string& path, const Options& options, const Progress& progress);
// replay_each, collecting the results.
std::vector<CallResult> replay_all(const std::string& path, const Options& options = {});

// One line per call, as `mate replay` prints it: format_name(dir, function) + "  " +
// format_outcome(result).
std::string format_line(const CallResult& r);
// "<call directory name>  <function>".
std::string format_name(const std::string& dir, const std::string& function);
// "<result>" or "<result>: <message>".
std::string format_outcome(const CallResult& r);

}  // namespace mate::replay
