// A module for the table unwinder's tests (test_table_unwinder.cpp), loaded with dlopen: calls
// back through `depth` frames of its own, some with a frame pointer (alloca), so a stack walk
// crosses a module the program did not link. Built twice (MATE_PROBE_VARIANT 1 and 2): the
// second is a different file, to stand in for a library replaced on disk after it was loaded.
#include <alloca.h>

#include <cstring>

namespace {

__attribute__((noinline)) int descend(int (*callback)(void*), void* arg, int depth) {
  if (depth <= 0) return callback(arg) + 1;
  if (depth % 2 == 0) {
    // A variable-size frame: the compiler addresses it from rbp, and so does its unwind rule.
    auto* scratch = static_cast<volatile char*>(alloca(static_cast<unsigned>(depth) * 24 + MATE_PROBE_VARIANT));
    scratch[0] = static_cast<char>(depth);
    return descend(callback, arg, depth - 1) + scratch[0] - depth + 1;
  }
  volatile int keep = depth;
  return descend(callback, arg, depth - 1) + keep - depth + 1;
}

#if MATE_PROBE_VARIANT == 2
// Moves the code above: a different file with the same symbols.
__attribute__((used)) int padding(int x) {
  volatile int v[64];
  for (int i = 0; i < 64; ++i) v[i] = x * i;
  return v[x & 63];
}
#endif

}  // namespace

extern "C" __attribute__((visibility("default"))) int mate_unwind_probe(int (*callback)(void*), void* arg, int depth) {
  return descend(callback, arg, depth);
}
