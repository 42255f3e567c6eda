// The level, destination, format and hooks, read from the registry once (or on reconfigure()).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>

#include "log_internal.hpp"
#include "mate/config.hpp"
#include "mate/core/initial_exec_tls.hpp"
#include "mate/core/quiet_write.hpp"

namespace mate::log {

namespace detail {

std::atomic<int> g_level{-1};

namespace {

struct Shared {
  std::mutex mutex;
  Settings settings;
  std::string destination = "stdout";  // opened when the level is above 0
  bool loaded = false;
  // What calls read: a copy of `settings`, replaced (never changed) at each change, and its
  // generation, which each thread compares with the snapshot it keeps (no lock per call).
  std::shared_ptr<const Settings> snapshot;
  std::atomic<std::uint64_t> generation{0};
};

Shared& shared() {
  static Shared* s = new Shared();  // never destroyed: calls may run during static destruction
  return *s;
}

// Makes the settings as they now are the ones calls see. Under the lock.
void publish_locked(Shared& s) {
  s.settings.hooks_from_level = std::numeric_limits<int>::max();
  for (const CallHook* hook : s.settings.hooks)
    s.settings.hooks_from_level = std::min(s.settings.hooks_from_level, hook->lowest_level());
  s.snapshot = std::make_shared<const Settings>(s.settings);
  s.generation.fetch_add(1, std::memory_order_release);
}

// Reads the three variables. An invalid value disables logging with one message: the host
// program never fails because of logging.
void load_locked(Shared& s) {
  Settings next;
  next.hooks = std::move(s.settings.hooks);
  try {
    next.level = static_cast<int>(config::loglevel());
    next.format = config::logformat() == "json" ? Format::Json : Format::Text;
    s.destination = config::logdest();
    if (next.level > 0) next.sink = core::LogSink::open(s.destination);
  } catch (const config::ConfigError& e) {
    core::write_stderr(std::string("mate: API logging disabled: ") + e.what() + "\n");
    next.level = 0;
    next.sink.reset();
  }
  s.settings = std::move(next);
  s.loaded = true;
  publish_locked(s);
  g_level.store(s.settings.level, std::memory_order_relaxed);
}

// Each thread's copy of the snapshot. `dead` (trivially destructible, so still readable) says
// the copy is gone: a call logged from another thread_local's destructor takes the lock. A
// thread keeps the snapshot it last used, and so the sink it names stays open after a
// reconfigure() until each such thread logs again or exits (reconfigure is for tests and tools).
struct ThreadSnapshot {
  std::uint64_t generation = 0;
  std::shared_ptr<const Settings> snapshot;
  // Snapshots replaced while calls held them (borrow_settings_of_this_thread), released when
  // the last hold is returned (all of them then: reconfigure() is rare, for tests and tools).
  std::vector<std::shared_ptr<const Settings>> retired;
  ~ThreadSnapshot();
};
MATE_INITIAL_EXEC thread_local bool t_snapshot_dead = false;
ThreadSnapshot::~ThreadSnapshot() { t_snapshot_dead = true; }
MATE_INITIAL_EXEC thread_local ThreadSnapshot t_snapshot;
MATE_INITIAL_EXEC thread_local int t_borrowers = 0;  // calls on this thread holding its settings

}  // namespace

std::shared_ptr<const Settings> current_settings() {
  Shared& s = shared();
  const std::uint64_t generation = s.generation.load(std::memory_order_acquire);
  if (!t_snapshot_dead && generation != 0 && t_snapshot.generation == generation) return t_snapshot.snapshot;
  std::shared_ptr<const Settings> settings;
  {
    std::lock_guard lock(s.mutex);
    if (!s.loaded) load_locked(s);
    settings = s.snapshot;
    if (!t_snapshot_dead) {
      if (t_snapshot.snapshot && t_borrowers > 0) t_snapshot.retired.push_back(std::move(t_snapshot.snapshot));
      t_snapshot.generation = s.generation.load(std::memory_order_relaxed);
      t_snapshot.snapshot = settings;
    }
  }
  if (settings->level > 0) register_crash_context_provider();  // outside the lock: see there
  return settings;
}

int* borrow_settings_of_this_thread() noexcept {
  ++t_borrowers;
  return &t_borrowers;
}

void return_borrowed_settings(int* holds) noexcept {
  if (holds != &t_borrowers || t_borrowers <= 0) return;  // not this thread's hold
  if (--t_borrowers == 0 && !t_snapshot_dead && !t_snapshot.retired.empty()) t_snapshot.retired.clear();
}

const Settings* current_settings_of_this_thread() {
  Shared& s = shared();
  const std::uint64_t generation = s.generation.load(std::memory_order_acquire);
  if (!t_snapshot_dead && generation != 0 && t_snapshot.generation == generation) return t_snapshot.snapshot.get();
  (void)current_settings();  // brings this thread's copy up to date (and reads the registry on first use)
  return t_snapshot_dead ? nullptr : t_snapshot.snapshot.get();
}

}  // namespace detail

int level() {
  int l = detail::g_level.load(std::memory_order_relaxed);
  return l >= 0 ? l : detail::current_settings()->level;
}

void reconfigure() {
  detail::Shared& s = detail::shared();
  int level = 0;
  {
    std::lock_guard lock(s.mutex);
    detail::load_locked(s);
    level = s.settings.level;
  }
  if (level > 0) detail::register_crash_context_provider();
}

void set_level_for_testing(int level) {
  detail::Shared& s = detail::shared();
  {
    std::lock_guard lock(s.mutex);
    if (!s.loaded) detail::load_locked(s);
    s.settings.level = level;
    if (level > 0 && !s.settings.sink) s.settings.sink = core::LogSink::open(s.destination);
    detail::publish_locked(s);
    detail::g_level.store(level, std::memory_order_relaxed);
  }
  if (level > 0) detail::register_crash_context_provider();
}

void add_call_hook(CallHook* hook) {
  // Does not read the registry: the dump writer installs its hook from a static initializer,
  // before the registry may be usable. Loading keeps the hooks.
  detail::Shared& s = detail::shared();
  std::lock_guard lock(s.mutex);
  if (std::find(s.settings.hooks.begin(), s.settings.hooks.end(), hook) == s.settings.hooks.end()) {
    s.settings.hooks.push_back(hook);
    if (s.loaded) detail::publish_locked(s);  // else the first load publishes
  }
}

void remove_call_hook(CallHook* hook) {
  detail::Shared& s = detail::shared();
  std::lock_guard lock(s.mutex);
  std::erase(s.settings.hooks, hook);
  if (s.loaded) detail::publish_locked(s);
}

}  // namespace mate::log
