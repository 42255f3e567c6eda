// MATE_INITIAL_EXEC: the TLS model of MATE's own thread-local variables on the logging path.
//
// In a shared library (libmate.so) a thread-local variable is by default reached through a call
// to __tls_get_addr in each function that reads one (six such calls on a level-1 logged call,
// ~8% of it). Initial-exec reads it at an offset from the thread pointer. It costs no more static
// TLS than before: the host read guard's variable must be initial-exec anyway (a signal handler
// reads it), which already puts all of libmate.so's thread-locals, a few hundred bytes, in the
// static TLS block. Only on variables MATE defines: referring to another library's thread-locals
// (libstdc++'s call_once state) with this model would force that library's TLS into the static
// block too, and dlopen of it then fails ("cannot allocate memory in static TLS block") when the
// block is full, as it is after `import torch`.
#pragma once

#if defined(__GNUC__) && defined(__ELF__)
#define MATE_INITIAL_EXEC __attribute__((tls_model("initial-exec")))
#else
#define MATE_INITIAL_EXEC
#endif
