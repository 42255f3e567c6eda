// mate/replay/guard_allocator.hpp — `mate replay --guard-alloc`: rebuilt tensors on guarded
// memory, so that a replayed kernel's out-of-bounds access is caught with the guard's report.
//
// Available when the build has the guard component (MATE_REPLAY_HAVE_GUARD is defined then).
// Host tensors get the process-wide guarded host allocator, CUDA/MUSA tensors the guarded
// allocator over the driver backend, both in the given placement mode.
#pragma once

#include <memory>
#include <string>

#include "mate/replay/replay.hpp"

namespace mate::replay {

// mode: "tail" (overruns hit the guard) or "head" (underruns do). Throws std::invalid_argument
// for another mode.
std::unique_ptr<TensorAllocator> make_guard_allocator(const std::string& mode);

}  // namespace mate::replay
