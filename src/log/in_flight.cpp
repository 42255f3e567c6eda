// The API calls in flight on each thread, and the crash-report provider that names them.
//
// Fixed thread_local fields only: the provider runs inside a signal handler (no malloc, no
// locks, no stdio). The pointer to the function name is a string literal's (see api.hpp).
#include <atomic>
#include <cstring>

#include "log_internal.hpp"
#include "mate/core/crash_context.hpp"
#include "mate/core/initial_exec_tls.hpp"
#include "mate/core/signal_safe_format.hpp"

namespace mate::log::detail {

namespace {

constexpr int kMaxDepth = 8;

struct InFlight {
  const char* names[kMaxDepth];
  std::uint64_t seqs[kMaxDepth];
  // Calls entered; deeper ones than kMaxDepth are counted but not named.
  int depth = 0;
};

MATE_INITIAL_EXEC thread_local InFlight in_flight;

std::size_t put(char* buf, std::size_t cap, std::size_t at, const char* text) noexcept {
  std::size_t n = std::strlen(text);
  if (at + n > cap) n = at < cap ? cap - at : 0;
  std::memcpy(buf + at, text, n);
  return at + n;
}

// "mate API call in flight on this thread: gemm #12 (inside outer #11)\n"
std::size_t provide(char* buf, std::size_t cap) noexcept {
  const InFlight& f = in_flight;
  int depth = f.depth < kMaxDepth ? f.depth : kMaxDepth;
  if (depth <= 0) return 0;
  std::size_t at = put(buf, cap, 0, "mate API call in flight on this thread: ");
  for (int i = depth - 1; i >= 0; --i) {
    if (i != depth - 1) at = put(buf, cap, at, i == depth - 2 ? " (inside " : ", inside ");
    at = put(buf, cap, at, f.names[i]);
    at = put(buf, cap, at, " #");
    at = put(buf, cap, at, core::decimal_text(f.seqs[i]).c_str());
  }
  if (depth > 1) at = put(buf, cap, at, ")");
  return put(buf, cap, at, "\n");
}

}  // namespace

int* push_in_flight(const char* name, std::uint64_t seq) noexcept {
  InFlight& f = in_flight;
  if (f.depth < kMaxDepth) {
    f.names[f.depth] = name;
    f.seqs[f.depth] = seq;
  }
  std::atomic_signal_fence(std::memory_order_release);  // fields before depth, for the handler
  ++f.depth;
  return &f.depth;
}

void pop_in_flight() noexcept {
  if (in_flight.depth > 0) --in_flight.depth;
}

void register_crash_context_provider() noexcept {
  // Once per process (every logged call asks); never under the settings lock, since the first
  // registration looks the guard's preload up with dlsym (mate/core/crash_context.hpp).
  static std::atomic<bool> registered{false};
  if (registered.load(std::memory_order_acquire)) return;
  if (core::register_crash_context(&provide)) registered.store(true, std::memory_order_release);
}

}  // namespace mate::log::detail
