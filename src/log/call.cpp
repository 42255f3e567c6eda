// One logged call: sequence number, inputs record before the body, outputs (or exception)
// record after it, hooks, in-flight bookkeeping. Only reached when the level is not 0.
#include <cxxabi.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>

#include "log_internal.hpp"

namespace mate::log::detail {

struct CallState {
  const char* name;
  std::optional<PythonOrigin> python;
  std::uint64_t seq;
  Settings settings;
  std::chrono::steady_clock::time_point start;
  int uncaught;
  std::function<void(ArgList&)> outputs;
  std::optional<Arg> return_value;
  CallOutcome outcome;
};

namespace {

std::atomic<std::uint64_t> g_seq{0};

Header header_for(const CallState& s) {
  Header h{s.name, s.seq, static_cast<long>(::getpid()), static_cast<long>(::gettid()), {}};
  ::clock_gettime(CLOCK_REALTIME, &h.time);
  return h;
}

std::string demangle(const std::type_info& type) {
  int status = 0;
  char* name = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : type.name();
  std::free(name);
  return out;
}

void write(const CallState& s, const std::string& record) {
  if (s.settings.sink) s.settings.sink->write(record);
}

}  // namespace

CallState* begin_call(const char* name, Collector collect, void* context, const PythonOrigin* python) {
  Settings settings = current_settings();  // also latches g_level on the first call
  if (settings.level <= 0) return nullptr;
  auto* s = new CallState{name, std::nullopt, g_seq.fetch_add(1, std::memory_order_relaxed) + 1, std::move(settings),
                          {}, std::uncaught_exceptions(), {}, {}, {}};
  if (python != nullptr) s->python = *python;
  const CallInfo info{s->name, s->seq, s->settings.level, s->python ? &*s->python : nullptr};
  try {
    if (s->settings.level < 3) {
      write(*s, render(s->settings.format, header_for(*s), Event::Call, s->settings.level, {}, nullptr));
    } else {
      ArgList inputs;
      collect(context, inputs);
      // Written (one write(2), no buffering) before the body runs: a crash keeps the inputs.
      write(*s, render(s->settings.format, header_for(*s), Event::Inputs, s->settings.level, inputs.args(), nullptr));
      for (CallHook* hook : s->settings.hooks) hook->before(info, inputs.args());
      note_device_ranges(s->name, s->seq, inputs.args());
    }
  } catch (...) {
    // Logging never breaks the call: a failure to describe the inputs loses only the record.
  }
  push_in_flight(s->name, s->seq);
  s->start = std::chrono::steady_clock::now();
  return s;
}

void set_output_collector(CallState* state, std::function<void(ArgList&)> collect) {
  state->outputs = std::move(collect);
}

void add_return_value(CallState* state, Arg value) { state->return_value = std::move(value); }

void record_exception(CallState* state, const std::type_info* type, const char* message) {
  state->outcome.threw = true;
  try {
    state->outcome.exception_type = type ? demangle(*type) : "";
    state->outcome.exception_message = message ? message : "";
  } catch (...) {
  }
}

void record_exception_named(CallState* state, std::string type, std::string message) {
  state->outcome.threw = true;
  state->outcome.exception_type = std::move(type);
  state->outcome.exception_message = std::move(message);
}

void end_call(CallState* s) noexcept {
  auto elapsed = std::chrono::steady_clock::now() - s->start;
  pop_in_flight();
  s->outcome.elapsed_us = std::chrono::duration<double, std::micro>(elapsed).count();
  if (std::uncaught_exceptions() > s->uncaught) s->outcome.threw = true;  // scope form
  if (s->settings.level >= 3) {
    try {
      const CallInfo info{s->name, s->seq, s->settings.level, s->python ? &*s->python : nullptr};
      ArgList outputs;
      if (!s->outcome.threw) {
        if (s->outputs) s->outputs(outputs);
        if (s->return_value) outputs.push_back(std::move(*s->return_value));
      }
      Event event = s->outcome.threw ? Event::Exception : Event::Outputs;
      write(*s, render(s->settings.format, header_for(*s), event, s->settings.level, outputs.args(), &s->outcome));
      for (CallHook* hook : s->settings.hooks) hook->after(info, outputs.args(), s->outcome);
    } catch (...) {
    }
  }
  delete s;
}

}  // namespace mate::log::detail
