// The program's SIGSEGV and SIGBUS actions, kept while the guard's handler holds the real ones
// (see program_signal_actions.hpp).
#include "guard/crash_handler/program_signal_actions.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>

namespace mate::guard {

namespace {

// Constant-initialized (constinit): the guard may install before this library's initializers run
// (a C++ program's runtime allocates first), and a dynamic initializer would then reset it.
constinit std::atomic<SigactionFunction> g_system{nullptr};

// A few slots per signal, published by index. A writer takes the next slot in turn, marks it
// busy (odd version), writes, marks it done (even) and publishes it; a reader copies the
// published slot and keeps the copy only if the version was even and unchanged throughout.
constexpr unsigned kSlots = 8;
struct Slot {
  std::atomic<std::uint32_t> version{0};
  struct sigaction action {};
};
struct Held {
  std::atomic<bool> held{false};
  std::atomic<unsigned> current{0};
  std::atomic<unsigned> next{1};
  Slot slots[kSlots];
};
constinit Held g_segv;
constinit Held g_bus;

Held* held_for(int sig) noexcept {
  if (sig == SIGSEGV) return &g_segv;
  if (sig == SIGBUS) return &g_bus;
  return nullptr;
}

void publish(Held& h, const struct sigaction& action) noexcept {
  const unsigned index = h.next.fetch_add(1, std::memory_order_relaxed) % kSlots;
  Slot& slot = h.slots[index];
  slot.version.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(&slot.action, &action, sizeof action);
  std::atomic_thread_fence(std::memory_order_release);
  slot.version.fetch_add(1, std::memory_order_release);  // even: done
  h.current.store(index, std::memory_order_release);
}

struct sigaction read_published(const Held& h) noexcept {
  struct sigaction copy {};
  // Retried while a writer is reusing the slot being read: at most a few times in practice (a
  // writer would have to go round all the slots while this copy is taken).
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const Slot& slot = h.slots[h.current.load(std::memory_order_acquire)];
    const std::uint32_t before = slot.version.load(std::memory_order_acquire);
    if ((before & 1) != 0) continue;
    std::memcpy(&copy, &slot.action, sizeof copy);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.version.load(std::memory_order_relaxed) == before) return copy;
  }
  return copy;
}

}  // namespace

void set_system_sigaction(SigactionFunction real) noexcept { g_system.store(real, std::memory_order_release); }

int system_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  const SigactionFunction real = g_system.load(std::memory_order_acquire);
  return real != nullptr ? real(sig, act, old) : ::sigaction(sig, act, old);
}

bool holds_program_action(int sig) noexcept {
  const Held* h = held_for(sig);
  return h != nullptr && h->held.load(std::memory_order_acquire);
}

void set_initial_program_action(int sig, const struct sigaction& action) noexcept {
  Held* h = held_for(sig);
  if (h == nullptr) return;
  publish(*h, action);
  h->held.store(true, std::memory_order_release);
}

bool exchange_program_action(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  if (!holds_program_action(sig)) return false;
  Held& h = *held_for(sig);
  const struct sigaction before = read_published(h);
  if (act != nullptr) publish(h, *act);
  if (old != nullptr) *old = before;
  return true;
}

struct sigaction program_action(int sig) noexcept {
  const Held* h = held_for(sig);
  if (h == nullptr) return {};
  return read_published(*h);
}

}  // namespace mate::guard
