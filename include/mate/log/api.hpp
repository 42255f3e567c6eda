// mate/log/api.hpp — API call logging: the instrumentation a kernel library puts on its API.
//
// Marking an API function takes one line that names the function and its arguments:
//
//   float gemm(const DLTensor* a, const DLTensor* b, DLTensor* out, float alpha) {
//     return MATE_API("gemm", a, b, out, alpha).outputs(MATE_ARGS(out)).run([&] {
//       ... the body: launch the kernel ...
//     });
//   }
//
// or, when the body should stay as it is (the scope form):
//
//   void Gemm::run(const TensorView& a, const TensorView& b, TensorView& out) {
//     MATE_API_SCOPE("Gemm.run", a, b, out);
//     MATE_API_OUTPUTS(out);
//     ... the body ...
//   }
//
// Each argument is logged under its spelling ("a", "out"); MATE_NAMED("m", expr) names an
// expression. See mate/log/arg.hpp for the accepted types.
//
// What is logged depends on MATE_LOGLEVEL (read once; see docs/logging.md):
//   0  nothing. The instrumentation costs a relaxed atomic load and a predictable branch; the
//      arguments are not evaluated (bench/log measures it).
//   1  one line per call: timestamp, pid, thread, per-process sequence number, function name.
//      The arguments are evaluated (copied) but not described.
//   3  the inputs, written (one write(2)) before the body runs, so a crash inside it leaves them
//      in the log; after the body, the outputs and the wall time. Tensors show dtype, shape,
//      strides, device, contiguity and VA range. An exception leaving the body through run() is
//      logged with its type and message and rethrown.
//   5  level 3 plus per-tensor statistics (mate/tensor/stats.hpp).
//   10 level 5; the dump component adds on-disk dumps through the call hooks below.
//
// Why run(lambda) is the recommended form: only a catch can see an exception's message, and
// run() is where that catch lives; run() also logs the body's return value as output "return".
// The scope form (an RAII guard) sees that an exception escaped (std::uncaught_exceptions) but
// not its message, so it logs the exception without one. Both forms log outputs and wall time.
//
// Outputs: MATE_ARGS(...) passed to outputs() is evaluated when the body has returned, so output
// tensors show their final contents (statistics at level 5). In the scope form, name only
// variables that outlive the guard (parameters, or locals declared before MATE_API_SCOPE).
//
// MATE_API(...) is an expression: follow it with .run(...) (alone, as a statement, it would log
// the call as finished at once). The inputs record is written by run(), right before the body,
// so that .stream(s) can name the call's stream first: MATE_API(...).stream(s).run(...). (In
// text with no call hook acting at the call's level, the dump's being 10, the record never
// reads device memory: MATE_API(...) writes it itself, one step less.)
// Inputs are taken by value when logging (tensors are pointers or views, so this is cheap);
// that keeps the caller's variables in registers at level 0.
//
// Function names must be string literals or otherwise static: the crash-report context keeps
// the pointer.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "mate/log/arg.hpp"

namespace mate::log {

// ---- level and configuration ----

// The current level (reads the registry on first use).
int level();
// Re-reads MATE_LOGLEVEL, MATE_LOGDEST and MATE_LOGFORMAT from the registry (which honours
// mate::config::ScopedOverride) and reopens the destination. For tests and tools.
void reconfigure();
// Sets the level without touching the registry (tests and benchmarks).
void set_level_for_testing(int level);

// ---- call hooks: the extension point for dumps ----

// Where a function that is not C++ lives, so that a dump can name it for replay (the Python
// decorator, mate.api_logging, fills it; C++ calls have none).
struct PythonOrigin {
  std::string function;  // "module:qualname"
  std::string script;    // the script's absolute path when the module is __main__, else ""
};

struct CallInfo {
  const char* name;
  std::uint64_t seq;
  int level;
  const PythonOrigin* python = nullptr;  // set for calls logged from Python
  void* stream = nullptr;  // the stream the call named (ApiCall::stream); nullptr: none
};

struct CallOutcome {
  double elapsed_us = 0;
  bool threw = false;
  std::string exception_type;     // demangled, "" when unknown
  std::string exception_message;  // "" when unknown (scope form)
};

// Called for every logged call at level >= 3 (and >= lowest_level()), with the same argument
// lists the log shows.
// before() runs after the inputs are written and before the body; after() after the body.
// While the call's stream is being captured into a graph, device memory cannot be read from a
// hook either: tensor::copy_extent_out and compute_stats say so (mate/tensor/memory.hpp,
// DeviceReadsSkipped) instead of reading.
class CallHook {
 public:
  virtual ~CallHook() = default;
  virtual void before(const CallInfo& call, const std::vector<Arg>& inputs) = 0;
  virtual void after(const CallInfo& call, const std::vector<Arg>& outputs, const CallOutcome& outcome) = 0;
  // The lowest level at which the hook does anything (the level-10 dump: 10): calls logged below
  // it do not reach it. A call that reaches no hook is, in text, rendered straight from the C++
  // values, without Arg lists.
  virtual int lowest_level() const noexcept { return 3; }
};
// The hook must stay alive until removed. Adding a hook already added does nothing. Thread-safe.
void add_call_hook(CallHook* hook);
void remove_call_hook(CallHook* hook);

// ---- the instrumentation ----

namespace detail {

// -1 until the registry has been read; then the level. Read relaxed on every call.
extern std::atomic<int> g_level;

struct CallState;
using Collector = void (*)(void* context, ArgList& args);
// Collects the inputs and writes them (the level-1 line, or the inputs record) at once: the
// whole start of a call, for callers that have everything by then (the Python decorator).
// `stream` is the call's stream (see ApiCall::stream): a CUstream / MUstream handle, nullptr for
// the device's default stream.
CallState* begin_call(const char* name, Collector collect, void* context, const PythonOrigin* python = nullptr,
                      void* stream = nullptr);
// A call that ApiCall::open() prepared, as ApiCall needs it inline: its level decides which
// steps of the logging path there are (levels 1 and 2 have none between the line and the end).
struct Opened {
  CallState* state = nullptr;  // nullptr: not logged (the level turned out to be 0)
  int level = 0;               // the level the call is logged at (from its settings)
  // Its line or inputs record is written: at levels 1 and 2, and for a call whose inputs record
  // was rendered from the values (text, no hook acting at the level: nothing there waits for the
  // stream); otherwise start_call writes it.
  bool started = false;
  // For a call whose state is the shared one of levels 1 and 2 (its line is all it writes): the
  // thread's count of calls in flight, which is all its end changes (ApiCall decrements it
  // inline, without a call); nullptr for any other call.
  int* in_flight = nullptr;
};
// The same in two steps, for ApiCall: prepare_call collects the inputs (the values live only as
// long as ApiCall::open), set_stream may name the stream, start_call writes them, once.
// At levels 1 and 2 prepare_call also writes the call's line, and returns a state shared by such
// calls (only ended).
Opened prepare_call(const char* name, Collector collect, void* context);
void set_stream(CallState* state, void* stream);
void start_call(CallState* state);
void set_output_collector(CallState* state, std::function<void(ArgList&)> collect);
void add_return_value(CallState* state, Arg value);
// The record the return value's line is rendered into on the fast path (text format, no hook
// acting at the level: no Arg built); nullptr on the general path. drop_return_text forgets a
// line that gave up.
TextRecord* return_record(CallState* state) noexcept;
void drop_return_text(CallState* state) noexcept;
// Does nothing for a null state (a call already ended).
void record_exception(CallState* state, const std::type_info* type, const char* message);
// An exception whose type is known by name (a Python exception: "ValueError").
void record_exception_named(CallState* state, std::string type, std::string message);
void end_call(CallState* state) noexcept;
// end_call for a call whose body returned (run(): no exception can have started leaving it, so
// the scope form's check of std::uncaught_exceptions() is skipped).
void end_returned_call(CallState* state) noexcept;

template <class T>
concept Loggable = requires(const T& v) { detail::to_arg(v); };

// ---- the logging path, out of line ----
//
// At level 0 an instrumented function must cost a load and a predictable branch, however hot:
// also when its float result feeds the next call. Anything the logging path does inside the
// instrumented function shapes the whole function, because both paths share its frame and its
// registers: a value used after an ordinary call on the logging path (the caller's arguments,
// used by the body after the inputs are logged; the body's result, returned after the outputs
// are logged) must live in a callee-saved register or on the stack, and the compiler picks that
// place for the whole function, so the level-0 path paid for it too (registers saved in the
// prologue, a float moved through a general-purpose register and back).
//
// So every call on the logging path goes through cold_call(fn, arg): on x86-64 a call, made from
// inline assembly, to a trampoline (src/log/cold_call.cpp) that saves every register an ordinary
// call may change, vector state included, calls fn(arg), and restores them. The compiler sees a
// call that changes nothing but its result, so the caller's values stay where they are and the
// level-0 path is the load, the branch and the body. Elsewhere it is an ordinary call.
// fn must not throw (the trampoline is no place to unwind through): each catches everything.
using ColdFn = void* (*)(void*) noexcept;

#if defined(__x86_64__) && !defined(__ILP32__) && defined(__ELF__) && defined(__GNUC__)
#define MATE_LOG_COLD_CALL_TRAMPOLINE 1
extern "C" void* mate_log_cold_call(ColdFn fn, void* arg) noexcept;  // only ever called from asm
// The call, with fn in rdi and arg in rsi, the result in rax. Through the GOT, not the PLT: a
// program that links libmate.so with lazy binding would otherwise reach the trampoline through
// the dynamic linker's resolver on the first call, which may change r10 and r11 (the ABI lets it)
// where the compiler was told nothing changes. The GOT entry is filled when the library is
// loaded; a static link turns the indirect call into a direct one. The 128 bytes skip the red
// zone, where a leaf function may keep data below the stack pointer that the call's return
// address would overwrite.
#define MATE_LOG_COLD_CALL_ASM \
  "leaq -128(%%rsp), %%rsp\n\t call *mate_log_cold_call@GOTPCREL(%%rip)\n\t leaq 128(%%rsp), %%rsp\n\t"
// How many times the trampoline saved the whole register state (tests: which way it took).
std::uint64_t cold_call_full_saves_for_testing() noexcept;
#endif

[[gnu::always_inline]] inline void* cold_call(ColdFn fn, void* arg) noexcept {
#if defined(MATE_LOG_COLD_CALL_TRAMPOLINE)
  void* result;
  asm volatile(MATE_LOG_COLD_CALL_ASM
      : "=a"(result)
      : "D"(fn), "S"(arg)
      : "memory", "cc");
  return result;
#else
  return fn(arg);
#endif
}

// What the out-of-line parts receive: copies of the inputs, or pointers to what stays put.
template <class... Ts>
struct OpenRequest {
  const char* name;
  const std::string_view* names;  // the arguments' spellings, a static array (MATE_LOG_NAMES_)
  std::tuple<Ts...> values;
  Opened opened;  // out
};
template <class... Ts>
void* open_call(void* r) noexcept {
  auto& req = *static_cast<OpenRequest<Ts...>*>(r);
  try {
    auto collect = [&](ArgList& args) {
      const std::string_view* n = req.names;
      args.reserve(sizeof...(Ts));
      std::apply([&](const Ts&... v) { (args.add(*n++, v), ...); }, req.values);
    };
    req.opened = prepare_call(
        req.name, [](void* c, ArgList& args) { (*static_cast<decltype(collect)*>(c))(args); }, &collect);
    return nullptr;
  } catch (...) {
    return nullptr;  // logging never breaks the call: this one goes unlogged
  }
}

struct StreamRequest {
  CallState* state;
  void* stream;
};
void* stream_call(void* r) noexcept;
void* start_call_cold(void* state) noexcept;
void* end_call_cold(void* state) noexcept;

template <class Collect>  // a forwarding reference's type: T& for an lvalue, T for an rvalue
struct OutputsRequest {
  CallState* state;
  std::remove_reference_t<Collect>* collect;
};
template <class Collect>
void* outputs_call(void* r) noexcept {
  auto& req = *static_cast<OutputsRequest<Collect>*>(r);
  try {
    set_output_collector(req.state, std::function<void(ArgList&)>(std::forward<Collect>(*req.collect)));
  } catch (...) {
    // Out of memory: the outputs go unlogged, the call goes on.
  }
  return nullptr;
}

template <class R>
struct ReturnRequest {
  CallState* state;
  const R* result;
};
// Records the body's result as output "return": its line on the fast path, else an Arg.
template <class R>
void record_return_value(CallState* state, const R& result) noexcept {
  try {
    if (TextRecord* record = return_record(state)) {
      write_text(*record, "return", result);
      if (!gave_up(*record)) return;
      drop_return_text(state);
    }
    Arg a = to_arg(result);
    a.name = "return";
    add_return_value(state, std::move(a));
  } catch (...) {
    drop_return_text(state);  // no half-written line: the value goes unlogged
  }
}
// The return value, then the call's end: one step on the logging path instead of two.
template <class R>
void* return_and_end_call(void* r) noexcept {
  auto& req = *static_cast<ReturnRequest<R>*>(r);
  record_return_value(req.state, *req.result);
  end_returned_call(req.state);
  return nullptr;
}

}  // namespace detail

class [[nodiscard]] ApiCall {
 public:
  // Not logging.
  ApiCall() noexcept = default;
  // Logging: the call that open() started.
  explicit ApiCall(detail::Opened opened) noexcept
      : state_(opened.state), in_flight_(opened.in_flight), level_(opened.level), started_(opened.started) {}

  // Starts logging a call (at level 1 and above, i.e. after MATE_API's level test): reads the
  // configuration on the first call, collects the inputs (written by start() or run()); a null
  // state when the level turns out to be 0. The values arrive as copies (cheap: tensors are
  // pointers or views), so the caller's variables never have their address taken.
  template <class... Ts>
  [[gnu::always_inline]] static detail::Opened open(const char* name, const std::string_view* names, Ts... values) {
    detail::OpenRequest<Ts...> req{name, names, {std::move(values)...}, {}};
    detail::cold_call(&detail::open_call<Ts...>, &req);
    return req.opened;
  }
  ~ApiCall() {
    if (state_ != nullptr) [[unlikely]] {
      // A line-only call (levels 1 and 2) ends by leaving the thread's calls in flight: done here,
      // a decrement, instead of a second trip through the trampoline. The count is the opening
      // thread's: a call ends on the thread it began on (a MATE_API_SCOPE must not be carried to
      // another thread, e.g. across a coroutine's suspension).
      if (in_flight_ != nullptr) {
        if (*in_flight_ > 0) --*in_flight_;
      } else {
        detail::cold_call(&detail::end_call_cold, state_);
      }
    }
  }
  ApiCall(const ApiCall&) = delete;
  ApiCall& operator=(const ApiCall&) = delete;

  // The stream the call's device work goes to: a CUstream / MUstream handle (a framework's
  // current stream, e.g. torch.cuda.current_stream().cuda_stream cast to a pointer); nullptr,
  // the default, is the device's default stream. At level 5 and above, when that stream is being
  // captured into a CUDA/MUSA graph, device tensors are logged and dumped as metadata only (a
  // synchronous read would break the capture). Name it before run().
  ApiCall& stream(void* s) noexcept {
    if (described()) [[unlikely]] {
      detail::StreamRequest req{state_, s};
      detail::cold_call(&detail::stream_call, &req);
    }
    return *this;
  }

  // Writes the inputs record now, once. run() does it right before the body; the scope form
  // (MATE_API_SCOPE) right away.
  void start() noexcept {
    if (described() && !started_) [[unlikely]] {
      detail::cold_call(&detail::start_call_cold, state_);
      started_ = true;
    }
  }

  // Arguments to log as outputs once the body has returned (not when it throws). The collector
  // may run twice: when a record rendered straight from the values gives up (a device tensor at
  // level 5, see docs/logging.md), the values are collected again as Args.
  template <class Collect>
  ApiCall& outputs(Collect&& collect) {
    if (described()) [[unlikely]] {
      detail::OutputsRequest<Collect> req{state_, &collect};
      detail::cold_call(&detail::outputs_call<Collect>, &req);
    }
    return *this;
  }

  // Runs the body. When logging, its return value is an output ("return") and an exception it
  // throws is logged with its message, then rethrown.
  template <class Body>
  decltype(auto) run(Body&& body) {
    if (state_ == nullptr) [[likely]] return std::forward<Body>(body)();
    return run_logged(std::forward<Body>(body));
  }

  bool active() const noexcept { return state_ != nullptr; }

 private:
  // Logged at level 3 or above: inputs, stream, outputs and the return value are recorded. At
  // levels 1 and 2 the call's line was written by open(), and only the end remains.
  bool described() const noexcept { return state_ != nullptr && level_ >= 3; }

  // Inlined so the body's closure never escapes (the caller's variables stay in registers); the
  // calls it makes are cold_call()s, which keep them there.
  template <class Body>
  [[gnu::always_inline]] inline decltype(auto) run_logged(Body&& body) {
    using R = std::invoke_result_t<Body&&>;
    start();
#if defined(__cpp_exceptions)
    try {
#endif
      if constexpr (std::is_void_v<R>) {
        std::forward<Body>(body)();
      } else {
        R result = std::forward<Body>(body)();
        if constexpr (detail::Loggable<std::remove_cvref_t<R>>) {
          if (described()) {
            using Value = std::remove_reference_t<R>;
            detail::ReturnRequest<Value> req{state_, &result};
            detail::cold_call(&detail::return_and_end_call<Value>, &req);
            state_ = nullptr;  // ended: nothing left for the destructor
          }
        }
        return result;
      }
#if defined(__cpp_exceptions)
    } catch (const std::exception& e) {
#if defined(__cpp_rtti)
      detail::record_exception(state_, &typeid(e), e.what());
#else
      detail::record_exception(state_, nullptr, e.what());
#endif
      throw;
    } catch (...) {
      detail::record_exception(state_, nullptr, "an exception not derived from std::exception");
      throw;
    }
#endif
  }

  detail::CallState* state_ = nullptr;
  int* in_flight_ = nullptr;  // a line-only call's in-flight count (see the destructor)
  int level_ = 0;
  bool started_ = false;
};

}  // namespace mate::log

// ---- macros ----

// MATE_LOG_FOR_EACH(m, x, y, z) -> m(x) m(y) m(z)  (up to 256 arguments)
#define MATE_LOG_PARENS_ ()
#define MATE_LOG_EXPAND_(...) MATE_LOG_EXPAND4_(MATE_LOG_EXPAND4_(MATE_LOG_EXPAND4_(MATE_LOG_EXPAND4_(__VA_ARGS__))))
#define MATE_LOG_EXPAND4_(...) MATE_LOG_EXPAND3_(MATE_LOG_EXPAND3_(MATE_LOG_EXPAND3_(MATE_LOG_EXPAND3_(__VA_ARGS__))))
#define MATE_LOG_EXPAND3_(...) MATE_LOG_EXPAND2_(MATE_LOG_EXPAND2_(MATE_LOG_EXPAND2_(MATE_LOG_EXPAND2_(__VA_ARGS__))))
#define MATE_LOG_EXPAND2_(...) MATE_LOG_EXPAND1_(MATE_LOG_EXPAND1_(MATE_LOG_EXPAND1_(MATE_LOG_EXPAND1_(__VA_ARGS__))))
#define MATE_LOG_EXPAND1_(...) __VA_ARGS__
#define MATE_LOG_FOR_EACH(macro, ...) __VA_OPT__(MATE_LOG_EXPAND_(MATE_LOG_FOR_EACH_HELPER_(macro, __VA_ARGS__)))
#define MATE_LOG_FOR_EACH_HELPER_(macro, a1, ...) \
  macro(a1) __VA_OPT__(MATE_LOG_FOR_EACH_AGAIN_ MATE_LOG_PARENS_(macro, __VA_ARGS__))
#define MATE_LOG_FOR_EACH_AGAIN_() MATE_LOG_FOR_EACH_HELPER_
#define MATE_LOG_ADD_ARG_(x) mate_args_.add(#x, x);
#define MATE_LOG_NAME_(x) #x,
// The arguments' spellings as a static array (one more, empty, entry: never of size zero). Only
// its address reaches the call site: no array built in the caller's frame, no strlen per call.
#define MATE_LOG_NAMES_(...)                                                                     \
  ([]() noexcept -> const ::std::string_view* {                                                 \
    static constexpr ::std::string_view mate_names_[] = {MATE_LOG_FOR_EACH(MATE_LOG_NAME_, __VA_ARGS__) ""}; \
    return mate_names_;                                                                        \
  }())

// A collector of named arguments: MATE_ARGS(a, b, MATE_NAMED("n", expr)).
#define MATE_ARGS(...)                                  \
  [&](::mate::log::ArgList & mate_args_) {              \
    (void)mate_args_;                                   \
    MATE_LOG_FOR_EACH(MATE_LOG_ADD_ARG_, __VA_ARGS__)   \
  }
// An argument named explicitly (for expressions).
#define MATE_NAMED(name, ...) (::mate::log::Named{name, __VA_ARGS__})
// The call object: MATE_API("name", args...).outputs(MATE_ARGS(...)).run([&] { body });
// The level test comes first, so that the argument collector is only built when logging.
#define MATE_API(name, ...)                                                               \
  (__builtin_expect(::mate::log::detail::g_level.load(::std::memory_order_relaxed) == 0, 1)        \
       ? ::mate::log::ApiCall()                                                                   \
       : ::mate::log::ApiCall(::mate::log::ApiCall::open(                                         \
             name, MATE_LOG_NAMES_(__VA_ARGS__) __VA_OPT__(, ) __VA_ARGS__)))
// The scope form: logs inputs now, outputs and wall time when the enclosing scope ends.
#define MATE_API_SCOPE(name, ...) \
  ::mate::log::ApiCall mate_api_call_ = MATE_API(name, __VA_ARGS__); \
  mate_api_call_.start()
// The scope form for a call whose device work goes to `stream` (see ApiCall::stream).
#define MATE_API_SCOPE_ON_STREAM(stream_handle, name, ...)            \
  ::mate::log::ApiCall mate_api_call_ = MATE_API(name, __VA_ARGS__); \
  mate_api_call_.stream(stream_handle).start()
#define MATE_API_OUTPUTS(...) mate_api_call_.outputs(MATE_ARGS(__VA_ARGS__))
