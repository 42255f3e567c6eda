// Starts the guard at load time, after every other initializer of the preload library: it is
// linked last, so its entry comes last in the library's .init_array (src/guard/CMakeLists.txt).
// The C++ runtime linked into the library allocates in its initializers (libstdc++'s emergency
// exception pool, 72 KiB): those allocations are the library's own, served by its arena, not the
// program's first guarded allocation.
#include "guard/preload/preload_state.hpp"

__attribute__((constructor)) static void mate_guard_preload_start() { mate::guard::preload::start_guarding(); }
