// Keeping replay from dumping the calls it replays (internal to replay).
#pragma once

#include <memory>

namespace mate::config {
class ScopedOverride;
}

namespace mate::replay::detail {

// Replayed calls run through their MATE_API instrumentation again. At MATE_LOGLEVEL=10 they
// would be dumped anew, into the dump being replayed when MATE_DUMP_DIR points there (and the
// next replay would replay them too). For its lifetime this caps the level at 5 (the log keeps
// everything but the dumps); a no-op when the level is 5 or below.
class NoDumpsWhileReplaying {
 public:
  NoDumpsWhileReplaying();
  ~NoDumpsWhileReplaying();
  NoDumpsWhileReplaying(const NoDumpsWhileReplaying&) = delete;
  NoDumpsWhileReplaying& operator=(const NoDumpsWhileReplaying&) = delete;

 private:
  std::unique_ptr<config::ScopedOverride> cap_;
};

}  // namespace mate::replay::detail
