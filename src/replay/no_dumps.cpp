// Capping the log level at 5 while replaying, so that replayed calls are never dumped.
#include "no_dumps.hpp"

#include "mate/config.hpp"
#include "mate/log/api.hpp"

#include <memory>
#include <mutex>

namespace mate::replay::detail {

namespace {

constexpr int kHighestLevelWithoutDumps = 5;

// One cap for all the replays in flight: the first to start sets it, the last to end lifts it,
// so a replay that ends while another thread still replays does not lift the other's cap.
std::mutex g_mutex;
int g_replays = 0;
std::unique_ptr<config::ScopedOverride> g_cap;

}  // namespace

NoDumpsWhileReplaying::NoDumpsWhileReplaying() {
  std::lock_guard lock(g_mutex);
  if (g_replays++ > 0 || log::level() <= kHighestLevelWithoutDumps) return;
  try {
    g_cap = std::make_unique<config::ScopedOverride>(config::Var::MATE_LOGLEVEL,
                                                     std::to_string(kHighestLevelWithoutDumps));
    log::reconfigure();
  } catch (...) {
    g_cap.reset();
    --g_replays;
    throw;
  }
}

NoDumpsWhileReplaying::~NoDumpsWhileReplaying() {
  std::lock_guard lock(g_mutex);
  if (--g_replays > 0 || !g_cap) return;
  g_cap.reset();
  try {
    log::reconfigure();
  } catch (...) {
    // The level read back is the one in force before the replay, valid then; nothing to say.
  }
}

}  // namespace mate::replay::detail
