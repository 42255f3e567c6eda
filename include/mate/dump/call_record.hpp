// mate/dump/call_record.hpp — one dumped call, read back: its metadata (call.json) and its
// tensors. This is what `mate replay` and other tools read; the writer is the level-10 hook
// (mate/dump/dump.hpp). docs/reference/dump-format.md specifies the layout.
//
// A call directory holds call.json, inputs/ and outputs/ (or inputs.safetensors and
// outputs.safetensors). call.json is replaced atomically at each status change:
//   writing_inputs -> inputs_saved -> completed | raised, or failed (I/O error while dumping).
// It names a tensor file only once the file is complete; a file it does not name (such as a
// leftover temporary `.<name>.tmp.<pid>` of an interrupted write) is not part of the dump.
// Readers never crash on damaged files: every problem is a DumpError naming the file and what
// is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mate/dump/tensor_file.hpp"
#include "mate/log/arg.hpp"

namespace mate::dump {

inline constexpr int kCallFormatVersion = 1;
inline constexpr const char* kCallFile = "call.json";

enum class CallStatus { WritingInputs, InputsSaved, Completed, Raised, Failed };
const char* to_string(CallStatus s) noexcept;

// One argument as recorded: the log's argument (mate/log/arg.hpp), read back with the one
// argument schema (mate/log/arg_json.hpp). Tensors carry their recorded layout and address
// range (Arg::tensor; never read its data) and where their snapshot is (Arg::file, Arg::key) or
// why there is none (Arg::error).
using RecordedArg = log::Arg;

struct CallRecord {
  std::string dir;  // the call directory
  std::string function;
  std::uint64_t seq = 0;
  long pid = 0;
  long tid = 0;
  std::string mate_version;
  std::string started;   // ISO 8601 UTC
  std::string finished;  // "" until the call returned
  // `started` of the first call its process dumped: with pid, identifies the process (pids are
  // reused). "" in dumps written before it was recorded.
  std::string process_first_started;
  CallStatus status = CallStatus::WritingInputs;
  std::string tensor_format;  // "mate" or "safetensors" (src/dump/tensor_format.hpp)
  // A call logged from Python (mate.api_logging): "module:qualname", and the script's path when
  // the module is __main__. Both "" for C++ calls.
  std::string python_function;
  std::string python_script;
  std::string exception_type;
  std::string exception_message;
  std::string error;  // status failed: what went wrong while dumping
  std::vector<RecordedArg> inputs;
  std::vector<RecordedArg> outputs;
};

// Parses call.json's text (`dir` is kept in the record). Throws DumpError.
CallRecord parse_call(std::string_view json_text, const std::string& dir);
// Reads DIR/call.json. Throws DumpError.
CallRecord read_call(const std::string& dir);
// Loads a recorded tensor argument's snapshot. Throws DumpError.
TensorRecord load_tensor(const CallRecord& call, const RecordedArg& arg);
// Whether the call's tensor files hold exactly the bytes of each tensor's recorded address range
// (the default format; not safetensors' contiguous copies): replay rebuilds aliasing from them.
bool keeps_layout(const CallRecord& call);

// The call directories at `path`: `path` itself when it holds call.json, else its
// subdirectories named like call directories (`*_pid*_call*`) in the order the calls were made:
// processes by the time of their first call, the calls of one process by sequence number (not
// by name: threads can create directories out of sequence order). pid, seq and times come from
// call.json, or from the directory name when call.json cannot be read; directories whose name
// does not parse either come last, by name. Throws DumpError when `path` is not a directory.
std::vector<std::string> find_call_dirs(const std::string& path);

}  // namespace mate::dump
