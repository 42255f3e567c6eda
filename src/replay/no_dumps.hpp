// Keeping replay from dumping the calls it replays (internal to replay).
#pragma once

namespace mate::replay::detail {

// Replayed calls run through their MATE_API instrumentation again. At MATE_LOGLEVEL=10 they
// would be dumped anew, into the dump being replayed when MATE_DUMP_DIR points there (and the
// next replay would replay them too). While any replay is in flight the level is capped at 5
// (the log keeps everything but the dumps), process-wide: other threads' calls are not dumped
// meanwhile either. Nested and concurrent replays share one cap, lifted when the last ends.
class NoDumpsWhileReplaying {
 public:
  NoDumpsWhileReplaying();
  ~NoDumpsWhileReplaying();
  NoDumpsWhileReplaying(const NoDumpsWhileReplaying&) = delete;
  NoDumpsWhileReplaying& operator=(const NoDumpsWhileReplaying&) = delete;
};

}  // namespace mate::replay::detail
