// Private interface of the log component: settings, record rendering, in-flight calls.
#pragma once

#include <ctime>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "mate/core/log_sink.hpp"
#include "mate/log/api.hpp"
#include "record_buffer.hpp"

namespace mate::log::detail {

enum class Format { Text, Json };

// What a call needs from the configuration, copied at the call's start.
struct Settings {
  int level = 0;
  Format format = Format::Text;
  std::shared_ptr<core::LogSink> sink;
  std::vector<CallHook*> hooks;
  // The lowest of the hooks' lowest_level(): calls below it need no Arg lists (INT_MAX: none).
  int hooks_from_level = std::numeric_limits<int>::max();
};
// The settings calls see now (a snapshot, never changed once published: a call keeps the one
// it started with). Reads the registry on first use (g_level becomes >= 0). No lock per call:
// each thread keeps the snapshot until the next change.
std::shared_ptr<const Settings> current_settings();
// The same snapshot without a reference of its own (no atomic count per call): valid until this
// thread asks again, since only the thread itself replaces its copy. nullptr once the thread's
// copy is gone (a call from another thread_local's destructor): use current_settings() then.
const Settings* current_settings_of_this_thread();
// A call's hold on this thread's settings (current_settings_of_this_thread) for as long as it
// runs, without counting a reference: while any such hold lasts, the snapshots this thread
// replaces are kept (retired), released when the last hold is returned. Returns the thread's
// count of holds, to be handed back to return_borrowed_settings: a call that ends on another
// thread (which api.hpp rules out) then returns nothing there, and its thread keeps what it
// retired.
int* borrow_settings_of_this_thread() noexcept;
void return_borrowed_settings(int* holds) noexcept;

enum class Event { Call, Inputs, Outputs, Exception };

struct Header {
  const char* name;
  std::uint64_t seq;
  long pid;
  long tid;
  timespec time;
};

// One record, newline-terminated (one line per record in JSON, several in text), appended to
// `out` (a buffer with room for most records inline: no allocation for them).
void render(Format format, const Header& header, Event event, int level, const std::vector<Arg>& args,
            const CallOutcome* outcome, RecordBuffer& out);

// The header line of a text record (the whole record for Event::Call).
void text_header(const Header& header, Event event, const CallOutcome* outcome, RecordBuffer& out);

// The address ranges of the device tensors among a call's inputs, noted in core's ring once the
// inputs record is written (note_device_ranges does the same from an Arg list).
struct DeviceRanges {
  static constexpr int kMax = 8;  // more: the record gives up (rendered from Args instead)
  int count = 0;
  std::uintptr_t lo[kMax];
  std::uintptr_t hi[kMax];
};

// A text record whose argument lines are being written (TextWriter, ArgList in text mode).
class TextRecord {
 public:
  RecordBuffer* out = nullptr;
  int level = 0;
  // The record is rendered without the check that the call's stream is not being captured into
  // a graph (the stream is not known yet when the inputs are rendered; no CaptureScope on the
  // fast path): at level 5 and above a tensor in device memory, whose statistics would read that
  // memory, makes the record give up, to be rendered again from Arg lists (call.cpp).
  bool device_stats_unchecked = false;
  bool gave_up = false;
  // Where the ranges of non-CPU tensors go (inputs only); nullptr: nowhere.
  DeviceRanges* ranges = nullptr;
};

// Records the device ranges of `inputs`' tensors in core, for device-fault reports.
void note_device_ranges(const char* call, std::uint64_t seq, const std::vector<Arg>& inputs) noexcept;

// The API calls in flight on this thread, for crash reports (async-signal-safe reads).
// Returns this thread's count of calls in flight: pop_in_flight() is `if (*p > 0) --*p` on it.
int* push_in_flight(const char* name, std::uint64_t seq) noexcept;
void pop_in_flight() noexcept;
void register_crash_context_provider() noexcept;

}  // namespace mate::log::detail
