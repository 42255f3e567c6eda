#!/usr/bin/env bash
# The main job: set up, build, and show MATE's real workflow on its reference kernel library:
# modules built by the JIT and then found in the cache, a level-3 log, a level-10 dump replayed
# with `mate replay`, the same from Python (a decorated torch function, python -m mate replay),
# and an out-of-bounds write caught by `mate guard-run`.
# Everything it writes stays under build/demo/ (the module cache too, so the first run builds).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
bin=build/default
mate=$bin/bin/mate
demo=$PWD/build/demo
rm -rf "$demo"
mkdir -p "$demo"
export MATE_WORKSPACE_BASE=$demo/workspace   # a fresh module cache for this demo
unset MATE_LOGLEVEL MATE_LOGDEST MATE_DUMP_DIR MATE_EXTRA_CFLAGS

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }
# Runs a command that must fail, shows its status, and fails the demo if it succeeded.
expect_failure() {
  printf '$ %s\n' "$*"
  local status=0
  "$@" || status=$?
  if [ "$status" -eq 0 ]; then echo "demo: expected a failure from: $*" >&2; exit 1; fi
  echo "(exit status $status, as expected)"
}

step "mate version"
show "$mate" version

step "Configuration: a typo and an invalid value, as a launch script would check them"
expect_failure env MATE_LOGLEVL=3 MATE_DEEPGEMM_MK_ALIGNMENT=64 "$mate" env --check

step "Modules: the build made AOT modules for the default flags"
show "$mate" module-status --filter aot

step "Your own flags change the module keys: no AOT module matches, so the first run builds (JIT)"
export MATE_EXTRA_CFLAGS=-O3
show "$mate" module-status --filter missing
show "$bin/examples/ops_demo"
show "$mate" module-status --filter jit

step "The second run finds every module in the cache: no compiler runs"
show "$bin/examples/ops_demo"

step "Level 3: each call's inputs are logged before it runs, outputs and time after"
MATE_LOGLEVEL=3 MATE_LOGDEST="$demo/ops.log" "$bin/examples/ops_demo" >/dev/null
echo "(the log is $demo/ops.log; its first call:)"
awk '/ ops.gemm_nt inputs/ {on=1} on {print} / ops.gemm_nt outputs/ && on {n++} n && /^$/ {exit}' "$demo/ops.log" | head -n 16

step "Level 10: every call's tensors are dumped, then mate replay runs the calls again and compares"
MATE_LOGLEVEL=10 MATE_LOGDEST="$demo/ops10.log" MATE_DUMP_DIR="$demo/dumps" "$bin/examples/ops_demo" >/dev/null
show ls "$demo/dumps"
show "$mate" replay --dir "$demo/dumps"

step "Python: a kernel library's torch functions decorated with @mate_api, logged at level 3"
python=/usr/bin/python3
export PYTHONPATH=$PWD/$bin/python   # the mate package this build made (docs/python.md)
show sed -n '/^@mate_api(name="demo.rmsnorm")/,/^$/p' examples/python/torch_kernels.py
MATE_LOGLEVEL=3 MATE_LOGDEST="$demo/python.log" "$python" examples/python/torch_kernels.py
echo "(the log is $demo/python.log; the first call, in the same format as C++ calls:)"
head -n 6 "$demo/python.log"

step "Python at level 10: the calls are dumped, then python -m mate replay runs them again and compares"
MATE_LOGLEVEL=10 MATE_LOGDEST="$demo/python10.log" MATE_DUMP_DIR="$demo/python_dumps" "$python" examples/python/torch_kernels.py >/dev/null
show ls "$demo/python_dumps"
echo "(each tensor is a file torch.load opens, strides kept: the transposed operand of scaled_matmul)"
matmul_dir=$(ls -d "$demo"/python_dumps/*demo.scaled_matmul | head -n 1)
show "$python" -c "import torch, sys; t = torch.load(sys.argv[1], weights_only=True); print(t.dtype, tuple(t.shape), t.stride(), 'contiguous' if t.is_contiguous() else 'non-contiguous')" "$matmul_dir/inputs/01_b.pt"
show "$python" -m mate replay --dir "$demo/python_dumps"

step "mate guard-run: a program writes one element past a heap buffer (tail mode catches it at the access)"
echo "(without the guard it runs to the end and prints a checksum:)"
show "$bin/examples/guard_heap_bug" past
expect_failure "$mate" guard-run --mode tail -- "$bin/examples/guard_heap_bug" past

step "mate guard-run --mode head: the same program writing one element before the start"
expect_failure "$mate" guard-run --mode head -- "$bin/examples/guard_heap_bug" before

step "mate guard-run -- python: a torch program writes one element past a tensor; caught at the write"
show sed -n '/^def write_one_past_the_end/,/^$/p' examples/python/torch_overflow.py
echo "(without the guard it runs to the end:)"
show "$python" examples/python/torch_overflow.py
expect_failure "$mate" guard-run -- "$python" examples/python/torch_overflow.py

step "Done"
echo "Module cache: $MATE_WORKSPACE_BASE/.cache/mate; dumps: $demo/dumps; logs: $demo/*.log"
echo "Guides: docs/jit.md, docs/logging.md, docs/dumps-and-replay.md, docs/guard-allocator.md, docs/python.md"
