#!/usr/bin/env bash
# Builds MATE and runs the device tests against the real CUDA driver on this machine:
#   * test_device: the driver backend through the fake driver (both prefixes) and, with a GPU,
#     RealDriver.* against libcuda.so.1 (which must not be skipped here);
#   * test_driver_abi: MATE's driver declarations against the toolkit's <cuda.h>;
#   * gpu_ops_compare: the CUDA reference kernels (mate::ops) against the host kernels;
#   * gpu_guard_write_past: a CUDA kernel writes one element past a buffer that ends against an
#     unmapped guard granule; the next synchronization must return CUDA_ERROR_ILLEGAL_ADDRESS.
# Usage: tests/gpu/run_gpu_tests.sh [BUILD_DIR]   (default: build/gpu)
# Needs cmake, ninja, a C++20 compiler, the packages of scripts/setup.sh, and the CUDA toolkit
# (nvcc; /usr/local/cuda/bin is searched too). Exits 0 with a SKIP line when no GPU is visible.
# On a machine without those packages (the lent GPU machines) use tests/gpu/device_check.sh,
# which carries them and runs these checks and more (docs/gpu-results.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build/gpu}

if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; } &&
   ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU visible (nvidia-smi -L failed and there is no /dev/nvidia<N>); the"
  echo "      device tests run through the fake driver in the normal test suite instead."
  exit 0
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L || true
for tool in cmake ninja; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "FAIL: $tool is not installed (scripts/setup.sh installs the build dependencies)" >&2
    exit 1
  fi
done

nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "FAIL: a GPU is visible but nvcc is not installed (on PATH or /usr/local/cuda/bin):" >&2
  echo "      the CUDA kernel of the guard-granule check cannot be built" >&2
  exit 1
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMATE_WERROR=ON \
  -DMATE_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER="$nvcc"
cmake --build "$build" --target test_device test_driver_abi gpu_guard_write_past gpu_ops_compare mate_cli

status=0
echo "== mate version"
"$build/bin/mate" version

echo "== test_device (fake driver, both prefixes; real driver)"
log=$(mktemp)
if ! "$build/tests/device/test_device" 2>&1 | tee "$log"; then status=1; fi
if grep -q '^\[  SKIPPED \] RealDriver' "$log"; then
  echo "FAIL: RealDriver tests were skipped although a GPU is visible (see the reason above)"
  status=1
fi
rm -f "$log"

echo "== test_driver_abi"
"$build/tests/gpu/test_driver_abi" || status=1

echo "== gpu_guard_write_past"
set +e
"$build/tests/gpu/gpu_guard_write_past"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "FAIL: gpu_guard_write_past exited with $rc (77 = it found no CUDA device)"
  status=1
fi

echo "== gpu_ops_compare (CUDA reference kernels against the host kernels)"
set +e
MATE_WORKSPACE_BASE="$build/ops_workspace" "$build/tests/gpu/gpu_ops_compare"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "FAIL: gpu_ops_compare exited with $rc (77 = it found no CUDA device)"
  status=1
fi

[ "$status" -eq 0 ] && echo "PASS: device tests against the real driver" || echo "FAIL: see above"
exit "$status"
