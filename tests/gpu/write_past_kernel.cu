// The one CUDA kernel of the real-GPU check: stores `value` at data[index], nothing else, so a
// caller can write exactly one element past a buffer.
#include <cuda_runtime.h>

namespace {

__global__ void store_one(float* data, int index, float value) { data[index] = value; }

}  // namespace

// Launches store_one<<<1, 1>>> on the legacy default stream; returns the launch's cudaError_t
// (0 when queued: a fault comes back only from the next synchronization).
extern "C" int mate_gpu_store_one(unsigned long long device_ptr, int index, float value) {
  store_one<<<1, 1>>>(reinterpret_cast<float*>(device_ptr), index, value);
  return static_cast<int>(cudaGetLastError());
}

// cudaGetErrorName / cudaGetErrorString of a launch error, for the report.
extern "C" const char* mate_gpu_error_text(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}
