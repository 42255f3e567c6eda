// One logged call: sequence number, inputs record before the body, outputs (or exception)
// record after it, hooks, in-flight bookkeeping, and no device reads while the call's stream is
// being captured into a graph. Only reached when the level is not 0.
#include <cxxabi.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <optional>
#include <utility>

#include "log_internal.hpp"
#include "mate/core/initial_exec_tls.hpp"
#include "mate/core/recent_device_ranges.hpp"
#include "mate/device/vendors.hpp"
#include "mate/tensor/memory.hpp"
#include "wall_clock.hpp"

namespace mate::log::detail {

// One per logged call (except ApiCall's at levels 1 and 2: see line_only_state), in a block
// the thread reuses (new_state_block). Kept within glibc's per-thread cache of small blocks
// (1032 bytes) for the calls that do allocate one (nested calls), several times faster to
// allocate than a larger block (the inline buffers are sized for that).
struct CallState {
  // `borrowed`: this thread's settings, held through `holds` (see prepare), else `owned`.
  CallState(const char* call, std::uint64_t number, const Settings* borrowed, int* holds,
            std::shared_ptr<const Settings> owned) noexcept
      : name(call),
        seq(number),
        settings(borrowed != nullptr ? borrowed : owned.get()),
        owned_settings(std::move(owned)),
        settings_holds(holds),
        uncaught(std::uncaught_exceptions()) {}

  const char* name;
  std::optional<PythonOrigin> python;
  std::uint64_t seq;
  const Settings* settings;  // the snapshot the call started with
  std::shared_ptr<const Settings> owned_settings;  // it, when not borrowed from the thread's
  int* settings_holds;  // when borrowed: the thread's count of holds (borrow_settings_of_this_thread)
  std::int64_t start_ns = 0;  // CLOCK_MONOTONIC when the body started (the elapsed time's start)
  std::int64_t end_ns = 0;    // and when it ended (also the outputs record's time); 0 before
  int uncaught;
  std::function<void(ArgList&)> outputs;
  std::unique_ptr<Arg> return_value;  // the general path's (a heap Arg: rare, and the state stays small)
  CallOutcome outcome;
  ArgList inputs;          // collected when the call object is made, written by start_call
  void* stream = nullptr;  // the call's stream (ApiCall::stream); nullptr: the default stream
  bool started = false;    // the inputs record is written
  // The fast path (text format, no hook acting at the call's level): records rendered straight
  // from the arguments, no Arg lists. `text` is set when the inputs record was rendered and
  // written so, when the call object was made (from a buffer on prepare_call's stack).
  bool text = false;
  InlineRecordBuffer<128> return_text;  // the return value's line ("return" as an Arg otherwise)
  TextRecord return_record;  // rendering into return_text
};
static_assert(sizeof(CallState) <= 1032, "see above");

namespace {

std::atomic<std::uint64_t> g_seq{0};

// The pid and tid of the records, cached: glibc does not cache getpid(), so each was a system
// call per record. A forked child forgets both in the atfork handler, which runs in its only
// thread, the one that called fork() (whose cached tid was the parent's).
std::atomic<long> g_pid{0};
MATE_INITIAL_EXEC thread_local long t_tid = 0;

long current_pid() noexcept {
  static const bool watching = [] {
    ::pthread_atfork(nullptr, nullptr, [] {
      g_pid.store(0, std::memory_order_relaxed);
      t_tid = 0;
    });
    return true;
  }();
  (void)watching;
  long pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = static_cast<long>(::getpid());
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

long current_tid() noexcept {
  if (t_tid == 0) t_tid = static_cast<long>(::gettid());
  return t_tid;
}

// The block of the thread's last ended call, kept for its next one: a logged call costs no
// malloc and free (~130 instructions with glibc's per-thread cache, ~3% of a level-3 call).
// One block: a nested call (a logged call inside another's body) allocates its own. `dead`
// (trivially destructible, so still readable) says the thread is exiting and its spare was
// freed: a call logged from another thread_local's destructor then frees its block itself.
struct SpareStateBlock {
  void* block = nullptr;
  ~SpareStateBlock();
};
MATE_INITIAL_EXEC thread_local bool t_spare_dead = false;
SpareStateBlock::~SpareStateBlock() {
  t_spare_dead = true;
  ::operator delete(block);
  block = nullptr;
}
MATE_INITIAL_EXEC thread_local SpareStateBlock t_spare;

void* new_state_block() {
  if (!t_spare_dead && t_spare.block != nullptr) return std::exchange(t_spare.block, nullptr);
  return ::operator new(sizeof(CallState));
}

// Any block will do: a state ended on another thread than it began on goes to that one's spare.
void delete_state(CallState* s) noexcept {
  s->~CallState();
  if (!t_spare_dead && t_spare.block == nullptr) {
    t_spare.block = s;
  } else {
    ::operator delete(s);
  }
}

// A record's header at the monotonic time `mono_ns` (its UTC time derived: wall_clock.hpp).
Header header_at(const char* name, std::uint64_t seq, std::int64_t mono_ns) {
  return Header{name, seq, current_pid(), current_tid(), utc_at(mono_ns)};
}

Header header_for(const char* name, std::uint64_t seq) { return header_at(name, seq, monotonic_ns()); }

// The outputs record is timed by the body's end reading (no clock read of its own).
Header header_for(const CallState& s) { return s.end_ns != 0 ? header_at(s.name, s.seq, s.end_ns) : header_for(s.name, s.seq); }

std::string demangle(const std::type_info& type) {
  int status = 0;
  char* name = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : type.name();
  std::free(name);
  return out;
}

void write_buffer(const CallState& s, const RecordBuffer& out) {
  if (s.settings->sink) s.settings->sink->write(out.view());
}

// Renders one record into a buffer on the stack (no allocation for most records) and hands it
// to the sink in one write. `tail`: lines rendered before (the return value's, fast path).
void write_record(const CallState& s, Event event, const std::vector<Arg>& args, const CallOutcome* outcome,
                  const RecordBuffer* tail = nullptr) {
  if (!s.settings->sink) return;
  InlineRecordBuffer<2048> out;
  render(s.settings->format, header_for(s), event, s.settings->level, args, outcome, out);
  if (tail != nullptr) out.append(tail->view());
  write_buffer(s, out);
}

// The fast path's inputs record, rendered into `out` while the values exist, its device ranges
// into `ranges`. False when it gave up (see TextRecord): the inputs are then collected as Args.
bool render_inputs(CallState& s, Collector collect, void* context, RecordBuffer& out, DeviceRanges& ranges) {
  text_header(header_for(s), Event::Inputs, nullptr, out);
  TextRecord record{&out, s.settings->level, true, false, &ranges};
  ArgList list(record);
  collect(context, list);
  return !record.gave_up;
}

// The fast path's start: the inputs record written (one write(2), no buffering) before the body
// runs, so that a crash keeps the inputs; then as start_call.
void start_text_call(CallState* s, const RecordBuffer& inputs, const DeviceRanges& ranges) {
  s->started = true;
  try {
    write_buffer(*s, inputs);
    for (int i = 0; i < ranges.count; ++i) core::note_device_range(s->name, s->seq, ranges.lo[i], ranges.hi[i]);
  } catch (...) {
    // Logging never breaks the call.
  }
  push_in_flight(s->name, s->seq);
  s->start_ns = monotonic_ns();  // the outputs record's wall time
}

// The fast path's outputs record: false when it gave up (rendered from Args then).
bool write_outputs_text(CallState& s, Event event) {
  InlineRecordBuffer<2048> out;
  text_header(header_for(s), event, &s.outcome, out);
  if (!s.outcome.threw) {
    TextRecord record{&out, s.settings->level, true};
    ArgList list(record);
    if (s.outputs) s.outputs(list);
    if (s.return_value) write_text_arg(record, *s.return_value);
    if (record.gave_up) return false;
    out.append(s.return_text.view());
  }
  write_buffer(s, out);
  return true;
}

// The devices (CUDA/MUSA kind and ordinal) whose memory describing `args` would read (stats,
// dumps), each once.
void devices_of(const std::vector<Arg>& args, std::vector<DLDevice>& out) {
  for (const Arg& a : args) {
    if (a.kind == Arg::Kind::List) devices_of(a.items, out);
    if (a.kind != Arg::Kind::Tensor || !a.tensor) continue;
    const tensor::Memory m = a.tensor->view().memory();
    if (m == tensor::Memory::Host || m == tensor::Memory::Other) continue;
    const DLDevice d = a.tensor->view().device();
    if (std::none_of(out.begin(), out.end(), [&](DLDevice o) { return o.device_type == d.device_type && o.device_id == d.device_id; }))
      out.push_back(d);
  }
}

// While alive, no device memory is read for a record of `s` whose stream is being captured
// into a CUDA/MUSA graph: a synchronous read there is illegal and would invalidate the
// capture. Asks the backend of each device among `args` (one or two driver calls per device
// and record, at level 5 and above only, and only for records with device tensors); when one
// device of a kind is capturing, the records show metadata only for every tensor of that kind,
// each saying why ("stats skipped: CUDA graph capture in progress"), and the dump hook saves no
// data for them.
class CaptureScope {
 public:
  CaptureScope(const CallState& s, const std::vector<Arg>& args) {
    if (s.settings->level < 5) return;
    std::vector<DLDevice> devices;
    devices_of(args, devices);
    for (const DLDevice d : devices) {
      const device::Kind kind = tensor::device_kind(tensor::memory_of(d));
      const std::size_t i = device::kind_index(kind);
      if (skipped_[i]) continue;  // another device of this kind is capturing: none is read
      // The device's own backend: the default (legacy) stream asked about below is per device.
      device::Backend* backend = tensor::backend_for(d);
      if (backend == nullptr) continue;  // nothing can be read anyway: the record says so
      // The call's stream, and the default (legacy) stream when another was named: a
      // synchronous copy goes through the legacy stream, which a capturing blocking stream
      // makes unusable even when the call's own stream is not capturing.
      bool capturing = false;
      device::Status st = backend->is_capturing(s.stream, &capturing);
      if (st.ok() && !capturing && s.stream != nullptr) st = backend->is_capturing(nullptr, &capturing);
      const std::string title = device::kind_title(kind);
      if (!st.ok())
        skipped_[i].emplace(kind, "cannot tell whether the " + title + " stream is being captured into a graph (" +
                                      (st.what ? st.what : "?") + ", code " + std::to_string(st.code) + ")");
      else if (capturing)
        skipped_[i].emplace(kind, title + " graph capture in progress");
    }
  }

 private:
  std::optional<tensor::DeviceReadsSkipped> skipped_[device::kKindCount];
};

// The state of every call that ApiCall logs at level 1 or 2, one per level, shared: its line is
// written and it is pushed in flight when the call object is made, and all its end does is pop
// it (no allocation, no state of the call's own). Never written after it is made; never freed
// (a thread may still be in a call while the process exits).
CallState* new_line_only_state(int level) {
  Settings settings;  // only the level is read: no sink, no hooks
  settings.level = level;
  auto* s = new CallState("", 0, nullptr, nullptr, std::make_shared<const Settings>(std::move(settings)));
  s->started = true;
  return s;
}

CallState* line_only_state(int level) {
  static CallState* const states[2] = {new_line_only_state(1), new_line_only_state(2)};
  return states[level - 1];
}

bool is_line_only(const CallState* s) noexcept { return s->seq == 0; }  // real calls count from 1

// A call's only record at levels 1 and 2 (its line), written at once, then the call in flight.
Opened write_line(const char* name, const Settings& settings) {
  CallState* const state = line_only_state(settings.level);  // (made on first use: may throw, unlogged)
  const std::uint64_t seq = g_seq.fetch_add(1, std::memory_order_relaxed) + 1;
  try {
    if (settings.sink) {
      InlineRecordBuffer<512> out;  // the header reserves ~170 bytes beyond the name
      if (settings.format == Format::Text) {
        text_header(header_for(name, seq), Event::Call, nullptr, out);  // in text the line is the header
      } else {
        const ArgList none;  // its args(): the one empty list, never destroyed
        render(settings.format, header_for(name, seq), Event::Call, settings.level, none.args(), nullptr, out);
      }
      settings.sink->write(out.view());
    }
  } catch (...) {
    // Logging never breaks the call.
  }
  int* const in_flight = push_in_flight(name, seq);
  return {state, settings.level, true, in_flight};
}

// A call's own state, its inputs collected (and at level 3 and above on the fast path written).
// `current`: the thread's settings, level 3 or above, borrowed for the call (ApiCall's calls, see
// prepare_call); nullptr: the call holds a reference to the current settings (begin_call).
CallState* prepare(const char* name, Collector collect, void* context, const Settings* current) {
  std::shared_ptr<const Settings> owned;
  if (current == nullptr) {
    owned = current_settings();  // also latches g_level on the first call
    if (owned->level <= 0) return nullptr;
  }
  int* const holds = current != nullptr ? borrow_settings_of_this_thread() : nullptr;
  CallState* s = nullptr;
  try {
    void* const block = new_state_block();
    s = new (block) CallState(name, g_seq.fetch_add(1, std::memory_order_relaxed) + 1, current, holds, std::move(owned));
  } catch (...) {
    if (holds != nullptr) return_borrowed_settings(holds);
    throw;
  }
  try {
    // Copied (or on the fast path rendered) now: ApiCall's values live only as long as its
    // constructor; written by start_call, so that ApiCall::stream() can still name the call's
    // stream.
    if (s->settings->level >= 3) {
      if (s->settings->format == Format::Text && s->settings->level < s->settings->hooks_from_level) {
        // A record rendered from the values waits for nothing (no hook acts at its level, no
        // stream): written now, one step less on the logging path. On the stack, not in the
        // call's state: it is done with before the call object exists, and a level-5 record
        // (statistics) outgrew what the state could hold within its allocation's size class.
        InlineRecordBuffer<2048> inputs;
        DeviceRanges ranges;
        bool rendered = false;
        try {
          rendered = render_inputs(*s, collect, context, inputs, ranges);
        } catch (...) {
          // Describing a value threw: described again as Args, which keeps the arguments before
          // it (ArgList::add drops only the one that failed).
        }
        if (rendered) {
          s->text = true;
          start_text_call(s, inputs, ranges);
          return s;
        }
      }
      collect(context, s->inputs);
    }
  } catch (...) {
    // Logging never breaks the call: a failure to describe the inputs loses only the record.
  }
  // Below level 3 the line is all there is: written now, one step less on the logging path.
  if (s->settings->level < 3) start_call(s);
  return s;
}

}  // namespace

Opened prepare_call(const char* name, Collector collect, void* context) {
  // ApiCall's calls borrow the thread's settings, not counting a reference (two atomic
  // operations a call): such a call ends on the thread it began on, and that thread keeps the
  // snapshots it replaces while it has borrowers (settings.cpp: retired, not released). At levels
  // 1 and 2 the call gets the shared state of write_line.
  const Settings* const current = current_settings_of_this_thread();
  if (current != nullptr && current->level < 3) {
    if (current->level <= 0) return {};
    return write_line(name, *current);
  }
  CallState* const s = prepare(name, collect, context, current);
  if (s == nullptr) return {};
  return {s, s->settings->level, s->started, nullptr};
}

CallState* begin_call(const char* name, Collector collect, void* context, const PythonOrigin* python, void* stream) {
  CallState* s = prepare(name, collect, context, nullptr);
  if (s == nullptr) return nullptr;
  if (python != nullptr) s->python = *python;
  s->stream = stream;
  start_call(s);
  return s;
}

void set_stream(CallState* state, void* stream) { state->stream = stream; }

void start_call(CallState* s) {
  if (s->started) return;
  s->started = true;
  const CallInfo info{s->name, s->seq, s->settings->level, s->python ? &*s->python : nullptr, s->stream};
  try {
    if (s->settings->level < 3) {
      write_record(*s, Event::Call, s->inputs.args(), nullptr);
    } else {
      CaptureScope capture(*s, s->inputs.args());
      // Written (one write(2), no buffering) before the body runs: a crash keeps the inputs.
      write_record(*s, Event::Inputs, s->inputs.args(), nullptr);
      for (CallHook* hook : s->settings->hooks)
        if (s->settings->level >= hook->lowest_level()) hook->before(info, s->inputs.args());
      note_device_ranges(s->name, s->seq, s->inputs.args());
    }
  } catch (...) {
    // Logging never breaks the call: a failure to describe the inputs loses only the record.
  }
  push_in_flight(s->name, s->seq);
  if (s->settings->level >= 3) s->start_ns = monotonic_ns();  // the outputs record's wall time
}

void set_output_collector(CallState* state, std::function<void(ArgList&)> collect) {
  state->outputs = std::move(collect);
}

void add_return_value(CallState* state, Arg value) { state->return_value = std::make_unique<Arg>(std::move(value)); }

TextRecord* return_record(CallState* state) noexcept {
  if (!state->text) return nullptr;
  state->return_record = TextRecord{&state->return_text, state->settings->level, true};
  return &state->return_record;
}

void drop_return_text(CallState* state) noexcept { state->return_text.clear(); }

void record_exception(CallState* state, const std::type_info* type, const char* message) {
  // Ended already (the return value's copy threw, after the record), or a line-only call.
  if (state == nullptr || is_line_only(state)) return;
  state->outcome.threw = true;
  try {
    state->outcome.exception_type = type ? demangle(*type) : "";
    state->outcome.exception_message = message ? message : "";
  } catch (...) {
  }
}

void record_exception_named(CallState* state, std::string type, std::string message) {
  if (is_line_only(state)) return;
  state->outcome.threw = true;
  state->outcome.exception_type = std::move(type);
  state->outcome.exception_message = std::move(message);
}

namespace {

// `returned`: ended by run() after the body returned (no exception can be leaving it).
void finish_call(CallState* s, bool returned) noexcept {
  if (is_line_only(s)) {
    pop_in_flight();
    return;
  }
  if (!s->started) start_call(s);  // a call object never run: its inputs still come first
  pop_in_flight();
  if (s->settings->level >= 3) {
    s->end_ns = monotonic_ns();
    s->outcome.elapsed_us = static_cast<double>(s->end_ns - s->start_ns) / 1000.0;
    if (!returned && std::uncaught_exceptions() > s->uncaught) s->outcome.threw = true;  // scope form
    try {
      const Event event = s->outcome.threw ? Event::Exception : Event::Outputs;
      if (!s->text || !write_outputs_text(*s, event)) {
        const CallInfo info{s->name, s->seq, s->settings->level, s->python ? &*s->python : nullptr, s->stream};
        ArgList outputs;
        if (!s->outcome.threw) {
          if (s->outputs) s->outputs(outputs);
          if (s->return_value) outputs.push_back(std::move(*s->return_value));
        }
        CaptureScope capture(*s, outputs.args());
        write_record(*s, event, outputs.args(), &s->outcome, s->outcome.threw ? nullptr : &s->return_text);
        for (CallHook* hook : s->settings->hooks)
          if (s->settings->level >= hook->lowest_level()) hook->after(info, outputs.args(), s->outcome);
      }
    } catch (...) {
    }
  }
  int* const holds = s->settings_holds;
  delete_state(s);
  if (holds != nullptr) return_borrowed_settings(holds);
}

}  // namespace

void end_call(CallState* s) noexcept { finish_call(s, false); }

void end_returned_call(CallState* s) noexcept { finish_call(s, true); }

}  // namespace mate::log::detail
