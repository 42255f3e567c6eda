// Whether `mate guard-run`'s preload can reach a program's allocator (it cannot in a statically
// linked or set-user-ID program).
#pragma once

#include <string>

namespace mate::guard {

// Why LD_PRELOAD cannot reach `program` (argv[0], searched on PATH as posix_spawnp does), or ""
// when it can or the program cannot be read (then spawning says what is wrong).
std::string why_preload_cannot_reach(const std::string& program);

}  // namespace mate::guard
