// Capping the log level at 5 while replaying, so that replayed calls are never dumped.
#include "no_dumps.hpp"

#include "mate/config.hpp"
#include "mate/log/api.hpp"

namespace mate::replay::detail {

namespace {
constexpr int kHighestLevelWithoutDumps = 5;
}

NoDumpsWhileReplaying::NoDumpsWhileReplaying() {
  if (log::level() <= kHighestLevelWithoutDumps) return;
  cap_ = std::make_unique<config::ScopedOverride>(config::Var::MATE_LOGLEVEL, std::to_string(kHighestLevelWithoutDumps));
  log::reconfigure();
}

NoDumpsWhileReplaying::~NoDumpsWhileReplaying() {
  if (!cap_) return;
  cap_.reset();
  log::reconfigure();
}

}  // namespace mate::replay::detail
