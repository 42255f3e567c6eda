// mate/jit/module_abi.h — bundled into every JIT and AOT module build as
// include/mate/jit/module_abi.h. Its exact text is part of every module key: changing it
// rebuilds every module. Host C++, CUDA and MUSA sources can include it.
#pragma once

// Marks a function the loader looks up with Module::symbol(). Modules build with
// -fvisibility=hidden, so only these are exported.
#ifdef __cplusplus
#define MATE_MODULE_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define MATE_MODULE_EXPORT __attribute__((visibility("default")))
#endif

// Bumped when the conventions above change.
#define MATE_MODULE_ABI_VERSION 1
