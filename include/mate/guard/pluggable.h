/* mate/guard/pluggable.h — the guarded allocator for a framework's pluggable-allocator hook.
 *
 * libmate_guard_hooks.so exports two functions with PyTorch's pluggable-allocator signatures:
 *
 *   import torch
 *   torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
 *       "/path/to/libmate_guard_hooks.so", "mate_guard_alloc", "mate_guard_free"))
 *
 * (torch_musa: the same under torch.musa, see docs/guard-allocator.md). Both must run before the
 * first device allocation. The first call for a device ordinal installs a guarded allocator for
 * it on the driver that MATE_DEVICE_DRIVER selects (auto: CUDA, then MUSA), configured by
 * MATE_GUARD_ALLOCATOR_MODE, _SYNC_ON_FREE and _LOG_ALLOCATIONS; device 0's is the process-wide
 * one, each other ordinal (up to 7) gets its own on that device's primary context.
 *
 * Contract: mate_guard_alloc returns NULL when it cannot allocate (the framework raises its
 * out-of-memory error) after a message on stderr saying why: no driver, an ordinal the driver does not have, graph
 * capture on `stream`, the system refusing mappings. mate_guard_free reports double and invalid
 * frees and canary corruption, then aborts. `stream` is the CUstream / MUstream handle.
 */
#ifndef MATE_GUARD_PLUGGABLE_H
#define MATE_GUARD_PLUGGABLE_H

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

void* mate_guard_alloc(ssize_t size, int device, void* stream);
void mate_guard_free(void* ptr, ssize_t size, int device, void* stream);

#ifdef __cplusplus
}
#endif

#endif
