// mate/core/child_environment.hpp — the environment for helper programs MATE starts itself.
//
// Under `mate guard-run` (or the test suite's guard mode) this process carries the guard's
// preload library in LD_PRELOAD and its bootstrap variables. The build tools the JIT starts
// (ninja, compilers) are not the program being debugged: guarding them would only make builds
// slow and noisy (a compiler soon reaches the system's mapping limit). Everything else the user
// set for their toolchain (LD_LIBRARY_PATH, CCACHE_DIR, ...) reaches them unchanged.
#pragma once

#include <string>
#include <vector>

namespace mate::core {

// `base` (a null-terminated array of "NAME=value", such as the process's own) without the guard: the
// preload library taken out of LD_PRELOAD (the variable dropped when nothing else is in it)
// and the MATE_GUARD_ALLOCATOR_* bootstrap variables dropped.
std::vector<std::string> unguarded_environment(char* const* base);

}  // namespace mate::core
