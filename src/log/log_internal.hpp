// Private interface of the log component: settings, record rendering, in-flight calls.
#pragma once

#include <fmt/format.h>

#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "mate/core/log_sink.hpp"
#include "mate/log/api.hpp"

namespace mate::log::detail {

enum class Format { Text, Json };

// What a call needs from the configuration, copied at the call's start.
struct Settings {
  int level = 0;
  Format format = Format::Text;
  std::shared_ptr<core::LogSink> sink;
  std::vector<CallHook*> hooks;
};
// The settings calls see now (a snapshot, never changed once published: a call keeps the one
// it started with). Reads the registry on first use (g_level becomes >= 0). No lock per call:
// each thread keeps the snapshot until the next change.
std::shared_ptr<const Settings> current_settings();

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
using Buffer = fmt::memory_buffer;
void render(Format format, const Header& header, Event event, int level, const std::vector<Arg>& args,
            const CallOutcome* outcome, Buffer& out);

// Records the device ranges of `inputs`' tensors in core, for device-fault reports.
void note_device_ranges(const char* call, std::uint64_t seq, const std::vector<Arg>& inputs) noexcept;

// The API calls in flight on this thread, for crash reports (async-signal-safe reads).
void push_in_flight(const char* name, std::uint64_t seq) noexcept;
void pop_in_flight() noexcept;
void register_crash_context_provider() noexcept;

}  // namespace mate::log::detail
