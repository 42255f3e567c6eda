#!/usr/bin/env bash
# One command for a lent GPU machine (bare image: CUDA 13 nvcc, PyTorch, CuPy, CMake, ninja,
# compute-sanitizer; no Debian -dev packages, no network): unpacks the .debs that
# tests/gpu/fetch_carry.sh downloaded into a private prefix (never /), configures MATE against
# that prefix, builds the device targets with all cores, then runs every device check with a
# PASS/FAIL/SKIP line and its time, and writes a Markdown table to $OUT/gpu-results.md (when OUT
# is set) and prints it.
#
#   tests/gpu/device_check.sh                 build, then every check (needs a GPU)
#   tests/gpu/device_check.sh --only a,b      reruns checks a and b on the existing build
#   tests/gpu/device_check.sh --no-gpu        dry run for a machine without a GPU: unpack, configure,
#                                             build, run what needs no GPU, list what would run
#   tests/gpu/device_check.sh --list          the checks
# Options: --build-dir DIR (default build/gpu-check), --carry DIR (default build/gpu-carry/debs),
#          --jobs N (default: all cores), --rounds N (clean workload rounds, default 300).
# Exit: 0 when no check failed, 1 otherwise, 2 usage or setup error.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/gpu-check
carry=$root/build/gpu-carry/debs
jobs=$(nproc)
rounds=300   # of the clean workload timed plain, under the guard and under compute-sanitizer
only=""
no_gpu=0

all_checks=(carry_packages carry_prefix mate_version test_device test_driver_abi gpu_guard_write_past gpu_ops_compare
            guard_run_tail guard_run_head unguarded_write python_import torch_memory_debug graph_capture_logging torch2_dtypes python_replay_cuda guard_run_torch pytest_guard_cuda
            sanitizer_catches sanitizer_vs_guard dump_replay_guard torch_load_dump vmm_costs)
# What each check proves (the table's last column and --list).
declare -A about=(
  [carry_packages]="tests/gpu/carry_smoke: each carried package used once (gtest/gmock tests), built against the prefix before MATE"
  [carry_prefix]="configure and build used the carried packages only (CMake cache dirs, compiler deps, libfmt at run time)"
  [mate_version]="mate version: the CUDA driver found through dlopen"
  [test_device]="test_device: driver backend, fake driver (both prefixes) and RealDriver.* (must not skip on a GPU)"
  [test_driver_abi]="test_driver_abi: MATE's driver declarations against the toolkit's <cuda.h>"
  [gpu_guard_write_past]="a kernel writes past a buffer ending at an unmapped granule: CUDA_ERROR_ILLEGAL_ADDRESS"
  [gpu_ops_compare]="the CUDA reference kernels (JIT-built by nvcc) against the host kernels"
  [guard_run_tail]="mate guard-run --mode tail: a -cudart shared program writes one float past a cudaMalloc buffer; 700, address in the allocation's guard"
  [guard_run_head]="mate guard-run --mode head: one float before the buffer; 700, address in the allocation's guard"
  [unguarded_write]="control: the same tail write without the guard (expected to go unnoticed)"
  [python_import]="the mate Python package (extension built for the image's python3) imports"
  [torch_memory_debug]="pytest tests/gpu/python/test_memory_debug_cuda.py: install_guard_allocator, clean model step equal to the unguarded one, CuPy kernel past a torch tensor caught"
  [torch2_dtypes]="pytest tests/gpu/python/test_torch2_dtypes.py: torch 2.x's float8/float4 dtypes (host and CUDA) logged, dumped, torch.load-ed and replayed from Python"
  [python_replay_cuda]="pytest tests/gpu/python/test_replay_cuda.py: python -m mate replay of Python calls on CUDA tensors (rebuilt on the device), passing and a changed function's mismatch"
  [guard_run_torch]="pytest tests/gpu/python/test_guard_run_torch.py: mate guard-run -- python on a CUDA torch training step (same result as plain), torch's device allocations guarded, a CuPy write past a torch tensor caught"
  [pytest_guard_cuda]="pytest tests/gpu/python/test_pytest_guard_cuda.py: pytest --guard-alloc (mate.pytest_plugin) on a project of CUDA torch tests"
  [graph_capture_logging]="pytest tests/gpu/python/test_graph_capture_logging.py: levels 5 and 10 inside torch.cuda.graph read no device memory, the graph replays, the records say why"
  [sanitizer_catches]="compute-sanitizer --tool memcheck on the tail and head programs: reports the invalid write"
  [sanitizer_vs_guard]="clean workload: plain, mate guard-run and compute-sanitizer memcheck times and their ratio"
  [dump_replay_guard]="MATE_LOGLEVEL=10 on the CUDA reference kernels, then mate replay --guard-alloc of the dump"
  [torch_load_dump]="torch.load (default weights_only) of the level-10 dump's .pt files"
  [vmm_costs]="tests/gpu/vmm_costs: each driver VMM step of a guarded allocation timed alone, then the guard's allocate/deallocate of a full granule and of a 1 KiB buffer (us per call)"
)
# Checks that run without a GPU in --no-gpu mode (the others are listed as what would run).
no_gpu_checks=" carry_packages carry_prefix mate_version test_device test_driver_abi python_import "

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --no-gpu) no_gpu=1 ;;
    --only) [ $# -ge 2 ] || { echo "device_check: --only needs a comma-separated list of checks (--list)" >&2; exit 2; }
            only=$2; shift ;;
    --build-dir) build=$(realpath -m "$2"); shift ;;
    --carry) carry=$(realpath -m "$2"); shift ;;
    --jobs) jobs=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --list) for c in "${all_checks[@]}"; do printf '%-22s %s\n' "$c" "${about[$c]}"; done; exit 0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "device_check: unknown argument '$1' (accepted: --no-gpu, --only CHECKS, --build-dir DIR, --carry DIR, --jobs N, --rounds N, --list)" >&2; exit 2 ;;
  esac
  shift
done
selected=("${all_checks[@]}")
if [ -n "$only" ]; then
  IFS=, read -r -a selected <<<"$only"
  for c in "${selected[@]}"; do
    [ -n "${about[$c]+x}" ] || { echo "device_check: unknown check '$c'; accepted: ${all_checks[*]}" >&2; exit 2; }
  done
fi

prefix=$build/carry-prefix
work=$build/device-check
mkdir -p "$work"
bin=$build/bin

# --- the machine ---------------------------------------------------------------------------
gpu_visible=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu_visible=1; fi
if [ "$no_gpu" -eq 0 ] && [ "$gpu_visible" -eq 0 ]; then
  echo "device_check: no NVIDIA GPU visible (nvidia-smi -L failed); on a machine without one run --no-gpu" >&2
  exit 2
fi
device="no GPU (dry run)"; driver="-"
if [ "$gpu_visible" -eq 1 ]; then
  device=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
fi
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
export PATH=$PATH:/usr/local/cuda/bin
cuda_version=$([ -n "$nvcc" ] && "$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p' || echo none)
python=$(command -v python3 || true)
[ "$no_gpu" -eq 1 ] && [ -x /usr/bin/python3 ] && python=/usr/bin/python3   # Debian's, with pybind11
os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")
cxx_version=$(c++ --version 2>/dev/null | head -1)
os+=", kernel $(uname -r)"

# --- results ------------------------------------------------------------------------------
results=()      # "check|RESULT|seconds|note"
failed=0
record() {  # check result seconds note
  results+=("$1|$2|$3|$4")
  [ "$2" = FAIL ] && failed=1
  printf '%s %s (%ss)%s\n' "$2" "$1" "$3" "${4:+: $4}"
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
log_of() { echo "$work/$1.log"; }
# A hung GPU program must cost one check, not the device tool's whole call: each program a check
# runs gets at most this long (exit 124 when it is stopped).
program_limit_s=180
limited() { timeout --kill-after=10 "$program_limit_s" "$@"; }

# --- carry: unpack into the private prefix ---------------------------------------------------
unpack_carry() {
  shopt -s nullglob
  local debs=("$carry"/*.deb)
  shopt -u nullglob
  if [ ${#debs[@]} -eq 0 ]; then
    echo "device_check: no .deb files in $carry: run tests/gpu/fetch_carry.sh on the development machine and name build/gpu-carry/debs in the device tool's carry" >&2
    exit 2
  fi
  local stamp
  stamp=$(ls -l "${debs[@]}" | awk '{print $5, $NF}' | sed "s|$carry/||" | md5sum | cut -d' ' -f1)
  if [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$stamp" ]; then return; fi
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for deb in "${debs[@]}"; do
    if command -v dpkg-deb >/dev/null 2>&1; then
      dpkg-deb -x "$deb" "$prefix" || { echo "device_check: dpkg-deb -x $deb failed" >&2; exit 2; }
    else  # a .deb is an ar archive holding data.tar.{xz,zst,gz}
      local data; data=$(ar t "$deb" | grep '^data\.tar')
      local unzip=(-J); case "$data" in *.zst) unzip=(--zstd) ;; *.gz) unzip=(-z) ;; esac
      ar p "$deb" "$data" | tar -x "${unzip[@]}" -C "$prefix" -f - ||
        { echo "device_check: cannot unpack $deb (no dpkg-deb; ar/tar failed)" >&2; exit 2; }
    fi
  done
  echo "$stamp" >"$prefix/.stamp"
  echo "device_check: unpacked ${#debs[@]} packages into $prefix"
}

# The CMake package directory of NAME in the prefix (Debian puts them under lib/<arch>/cmake or
# share/cmake or share/<name>/cmake).
package_dir() {
  local file
  file=$(find "$prefix/usr" \( -name "$1Config.cmake" -o -name "$2-config.cmake" \) 2>/dev/null | head -1)
  [ -n "$file" ] && dirname "$file"
}

# Exactly the carried packages: each one's CMake package dir in the prefix, named explicitly, so
# find_package never falls back to a system copy (it still finds the toolkit and Python, which
# are not carried). CMake 4 (pip's) refuses packages declaring support for CMake < 3.5 without
# CMAKE_POLICY_VERSION_MINIMUM.
carried_package_args=()
set_carried_package_args() {
  carried_package_args=(
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5
    "-Dfmt_DIR=$(package_dir fmt fmt)"
    "-Dnlohmann_json_DIR=$(package_dir nlohmann_json nlohmann_json)"
    "-DCLI11_DIR=$(package_dir CLI11 cli11)"
    "-Ddlpack_DIR=$(package_dir dlpack dlpack)"
    "-DGTest_DIR=$(package_dir GTest gtest)"
    "-DXXHASH_INCLUDE_DIR=$prefix/usr/include"
  )
}

# Headers of the carried packages that a build read from the system include directory (from
# ninja's dependency log of BUILD_DIR); there must be none.
system_headers_of_carried_packages() {
  (cd "$1" && ninja -t deps 2>/dev/null |
    grep -E '^ +/usr/(local/)?include/(fmt|nlohmann|CLI|dlpack|gtest|gmock|pybind11)/|^ +/usr/(local/)?include/xxhash\.h' | sort -u)
}

pybind11_source="carried pybind11-dev"
configure() {
  local args=(
    -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
    # -Werror stays with the development compiler (CI); another compiler's new warnings must not
    # cost the one GPU call.
    -DMATE_WERROR=OFF -DMATE_BUILD_BENCH=OFF -DMATE_BUILD_TESTS=ON
    "${carried_package_args[@]}"
  )
  if [ -n "$nvcc" ]; then
    args+=("-DCMAKE_CUDA_COMPILER=$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90
           "-DCUDAToolkit_ROOT=$(dirname "$(dirname "$(realpath "$nvcc")")")")
  fi
  if [ -n "$python" ]; then
    args+=("-DMATE_PYTHON=$python")
    # Debian bookworm's pybind11 (2.10) predates Python 3.12 support (2.11); on the GPU machine
    # the image's own pybind11 (pip) matches its Python, so it is preferred there.
    local image_pybind11=""
    if [ "$no_gpu" -eq 0 ]; then image_pybind11=$("$python" -m pybind11 --cmakedir 2>/dev/null || true); fi
    if [ -n "$image_pybind11" ] && [ -d "$image_pybind11" ]; then
      args+=("-Dpybind11_DIR=$image_pybind11"); pybind11_source="the image's pybind11 ($image_pybind11)"
    else
      args+=("-Dpybind11_DIR=$(package_dir pybind11 pybind11)")
    fi
  fi
  if command -v ccache >/dev/null 2>&1 && [ -n "${CCACHE_DIR:-}" ]; then
    args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake "${args[@]}" >"$(log_of configure)" 2>&1 || {
    tail -40 "$(log_of configure)"; echo "device_check: configure failed (log: $(log_of configure))" >&2; return 1; }
  grep -E "mate Python package|not built|CUDA" "$(log_of configure)" || true
  # The compiler CMake chose, which need not be `c++` on PATH (the image's is /opt/gcc/bin/g++).
  local cxx; cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
  [ -n "$cxx" ] && cxx_version="$cxx: $("$cxx" --version 2>/dev/null | head -1)"
  echo "device_check: C++ compiler $cxx_version"
}

build_targets=(test_device test_driver_abi gpu_guard_write_past gpu_ops_compare gpu_cudart_write_past
               mate_cli mate_guard_preload mate_guard_hooks vmm_costs)
build() {
  local targets=() t
  [ -n "$nvcc" ] || build_targets=(test_device mate_cli mate_guard_preload mate_guard_hooks)
  # Only what the configure made: a target it left out (its check says why) must not cost the
  # whole build.
  for t in "${build_targets[@]}" mate_python; do
    if grep -q "^build $t:" "$build/build.ninja" 2>/dev/null; then targets+=("$t")
    elif [ "$t" != mate_python ]; then echo "device_check: target $t was not configured; its check will say why"; fi
  done
  echo "device_check: building ${targets[*]} with $jobs jobs"
  # The log goes to $OUT as it is written: a build stopped at the device tool's limit still tells
  # how far it got.
  nice cmake --build "$build" -j "$jobs" --target "${targets[@]}" 2>&1 |
    tee "$(log_of build)" ${OUT:+"$OUT/build.log"} >/dev/null || {
    grep -E "error|Error" "$(log_of build)" | head -40; tail -20 "$(log_of build)"
    echo "device_check: build failed (log: $(log_of build))" >&2; return 1; }
  echo "device_check: build done ($(grep -c 'warning:' "$(log_of build)") compiler warnings; log: $(log_of build))"
  # A toolchain whose C++ runtime is static puts a copy in each library (kept private: CMakeLists.txt).
  if [ -f "$build/lib/libmate.so" ]; then
    if readelf -d "$build/lib/libmate.so" | grep -q 'libstdc++'; then cxx_version+=", shared C++ runtime"
    else cxx_version+=", static C++ runtime (private to each library)"; fi
  fi
}

# --- checks -------------------------------------------------------------------------------
# Each prints what it saw to its log and sets `note`; returns 0 PASS, 1 FAIL, 77 SKIP.
note=""

check_carry_prefix() {
  local cache=$build/CMakeCache.txt bad=""
  for var in fmt_DIR nlohmann_json_DIR CLI11_DIR dlpack_DIR GTest_DIR XXHASH_INCLUDE_DIR; do
    local value
    value=$(sed -n "s/^$var:[A-Z]*=//p" "$cache")
    echo "$var=$value"
    case "$value" in "$prefix"/*) ;; *) bad+=" $var=$value" ;; esac
  done
  local pybind11
  pybind11=$(sed -n 's/^pybind11_DIR:[A-Z]*=//p' "$cache"); echo "pybind11_DIR=$pybind11 ($pybind11_source)"
  # The headers each compiled file read (ninja's deps log): none of the carried packages' headers
  # may come from the system include directory.
  local system_headers
  system_headers=$(system_headers_of_carried_packages "$build")
  local carried_headers
  # (relative to the build dir when ccache's CCACHE_BASEDIR rewrote the include flags)
  carried_headers=$(cd "$build" && ninja -t deps 2>/dev/null | grep -cE "^ +($prefix|${prefix#"$build"/})/" || true)
  echo "headers read from the prefix: $carried_headers; from the system for carried packages: $(echo -n "$system_headers" | grep -c . || true)"
  [ -n "$system_headers" ] && { echo "$system_headers" | head; bad+=" system headers used"; }
  # Which libfmt a built program loads by its own RUNPATH (LD_LIBRARY_PATH cleared).
  local program="" candidate fmt_lib="" loads="no program built yet to check libfmt"
  for candidate in "$bin/mate" "$build/tests/device/test_device"; do
    [ -x "$candidate" ] && { program=$candidate; break; }
  done
  if [ -n "$program" ]; then
    fmt_lib=$(LD_LIBRARY_PATH='' ldd "$program" | awk '/libfmt/ {print $3}')
    echo "$program loads libfmt from: ${fmt_lib:-(not linked)}"
    case "$fmt_lib" in "$prefix"/*) ;; *) bad+=" libfmt=${fmt_lib:-not found}" ;; esac
    loads="$(basename "$program") loads $fmt_lib"
  fi
  if [ -n "$bad" ]; then note="not from the prefix:$bad"; return 1; fi
  note="6 package dirs in the prefix; $carried_headers header reads from it in $(cd "$build" && ninja -t deps 2>/dev/null | grep -c '^[^ ].*: #deps') compiled files, none from /usr/include; $loads"
  return 0
}

# tests/gpu/carry_smoke: every carried package used once, built in seconds before MATE's build.
check_carry_packages() {
  local smoke=$work/carry-smoke
  rm -rf "$smoke"
  cmake -S "$root/tests/gpu/carry_smoke" -B "$smoke" -G Ninja "${carried_package_args[@]}" &&
    cmake --build "$smoke" -j "$jobs" || { note="the carried packages do not build a small program (see log)"; return 1; }
  LD_LIBRARY_PATH='' "$smoke/carry_smoke" || { note="the small program's tests failed"; return 1; }
  local system_headers fmt_lib
  system_headers=$(system_headers_of_carried_packages "$smoke")
  fmt_lib=$(LD_LIBRARY_PATH='' ldd "$smoke/carry_smoke" | awk '/libfmt/ {print $3}')
  echo "libfmt: $fmt_lib"
  [ -z "$system_headers" ] || { echo "$system_headers"; note="headers read from /usr/include: $(echo "$system_headers" | head -3 | tr '\n' ' ')"; return 1; }
  case "$fmt_lib" in "$prefix"/*) ;; *) note="libfmt loaded from ${fmt_lib:-nowhere}, not the prefix"; return 1 ;; esac
  note="fmt, nlohmann-json, CLI11, dlpack, xxhash, GoogleTest/gMock: $(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\./\1 tests passed/p' "$(log_of carry_packages)"); no system headers; libfmt from the prefix"
}

check_mate_version() {
  "$bin/mate" version || { note="mate version failed"; return 1; }
  note=$("$bin/mate" version | grep -o 'cuda driver: [^;]*' | head -1)
  if [ "$gpu_visible" -eq 1 ] && ! grep -q 'cuda driver: libcuda.so.1' <<<"$note"; then return 1; fi
  return 0
}

check_test_device() {
  limited "$build/tests/device/test_device" 2>&1; local rc=$?
  local log; log=$(cat "$(log_of test_device)")
  note=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\./\1 passed/p; s/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below:/\1 skipped/p; s/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below:/\1 failed/p' <<<"$log" | paste -sd, -)
  [ $rc -ne 0 ] && return 1
  if grep -q '^\[  SKIPPED \] RealDriver' <<<"$log"; then
    if [ "$gpu_visible" -eq 1 ]; then note+="; RealDriver tests skipped although a GPU is visible"; return 1; fi
    note+="; RealDriver.* skipped (no GPU)"
  fi
  return 0
}

check_test_driver_abi() {
  [ -x "$build/tests/gpu/test_driver_abi" ] || { note="not built (no CUDA toolkit headers)"; return 77; }
  limited "$build/tests/gpu/test_driver_abi" 2>&1 || { note="see log"; return 1; }
  note=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\./\1 passed/p' "$(log_of test_driver_abi)")
}

check_gpu_guard_write_past() {
  limited "$build/tests/gpu/gpu_guard_write_past" 2>&1; local rc=$?
  note=$(grep -E 'synchronize after' "$(log_of gpu_guard_write_past)" | head -1)
  [ $rc -eq 77 ] && return 77
  return $rc
}

check_gpu_ops_compare() {
  MATE_WORKSPACE_BASE=$work/ops_workspace limited "$build/tests/gpu/gpu_ops_compare" 2>&1; local rc=$?
  note=$(tail -1 "$(log_of gpu_ops_compare)")
  return $rc
}

# mate guard-run on the -cudart shared program, one fault per process; PASS when the program saw
# error 700 and the address it wrote lies in the guard range the allocation log gives for the
# buffer (so the fault is attributed to that allocation).
guard_run_side() {
  local mode=$1 out
  out=$(limited "$bin/mate" guard-run --mode "$mode" --log-allocations -- "$build/tests/gpu/gpu_cudart_write_past" "$mode" 2>&1)
  local rc=$?
  echo "$out"
  echo "exit status: $rc"
  if ! grep -q 'reported as an illegal address' <<<"$out"; then
    note="the $mode write was not reported (exit $rc)"; return 1
  fi
  local written begin
  written=$(sed -n 's/^writing .* at \(0x[0-9a-f]*\)$/\1/p' <<<"$out")
  begin=$(sed -n 's/^buffer \[\(0x[0-9a-f]*\),.*/\1/p' <<<"$out")
  # mate guard: alloc #ID user [BEGIN, END) size N mode M cuda guard [G0, G1); the buffer's line
  # is the one whose BEGIN equals the pointer cudaMalloc returned (compared as numbers).
  local line="" id="" g0="" g1="" l b
  while IFS= read -r l; do
    b=$(sed -n 's/.* user \[\(0x[0-9a-fA-F]*\),.*/\1/p' <<<"$l")
    if [ -n "$b" ] && [ -n "$begin" ] && [ $((b)) -eq $((begin)) ]; then line=$l; fi
  done < <(grep 'mate guard: alloc #' <<<"$out")
  if [ -z "$line" ]; then note="error 700 seen, but no --log-allocations line for the buffer at ${begin:-?}"; return 1; fi
  id=$(sed -n 's/.*alloc #\([0-9]*\).*/\1/p' <<<"$line")
  g0=$(sed -n 's/.* guard \[\(0x[0-9a-fA-F]*\),.*/\1/p' <<<"$line")
  g1=$(sed -n 's/.* guard \[0x[0-9a-fA-F]*, \(0x[0-9a-fA-F]*\)).*/\1/p' <<<"$line")
  if [ -n "$g0" ] && [ -n "$g1" ] && [ $((written)) -ge $((g0)) ] && [ $((written)) -lt $((g1)) ]; then
    note="error 700; the write at $written lies in allocation #$id's $mode guard [$g0, $g1)"
    grep -q 'mate guard: device fault' <<<"$out" && note+="; guard report printed"
    return 0
  fi
  note="error 700, but the write at $written is not in allocation #$id's guard [$g0, $g1): $line"
  return 1
}
check_guard_run_tail() { guard_run_side tail; }
check_guard_run_head() { guard_run_side head; }

check_unguarded_write() {
  limited "$build/tests/gpu/gpu_cudart_write_past" tail 2>&1; local rc=$?
  case $rc in
    1) note="unguarded, the tail write went unnoticed (as expected: why the guard exists)"; return 0 ;;
    0) note="unguarded, the tail write was reported too (the allocation happened to end at unmapped memory)"; return 0 ;;
    *) note="exit $rc"; return 1 ;;
  esac
}

check_python_import() {
  [ -d "$build/python/mate" ] && ls "$build"/python/mate/_mate*.so >/dev/null 2>&1 ||
    { note="the extension was not built (configure: $(grep -m1 'mate Python package' "$(log_of configure)"))"; return 77; }
  PYTHONPATH=$build/python "$python" -c 'import mate, mate.memory_debug as m; print(mate.__file__, m.install_guard_allocator)' 2>&1 ||
    { note="import failed"; return 1; }
  note="import mate with $("$python" --version 2>&1), pybind11: $pybind11_source"
}

# pytest of one file of tests/gpu/python, for check $1.
gpu_pytest() {
  ls "$build"/python/mate/_mate*.so >/dev/null 2>&1 || { note="the Python package was not built"; return 77; }
  PYTHONPATH=$build/python PYTHONUNBUFFERED=1 limited "$python" -m pytest -q -p no:cacheprovider -rs --durations=0 "$root/tests/gpu/python/$2" 2>&1
  local rc=$?
  note=$(grep -E '[0-9]+ (passed|failed|skipped)' "$(log_of "$1")" | tail -1)
  [ $rc -eq 5 ] && { note="no tests collected"; return 1; }
  return $rc
}
check_torch_memory_debug() { gpu_pytest torch_memory_debug test_memory_debug_cuda.py; }
check_graph_capture_logging() { gpu_pytest graph_capture_logging test_graph_capture_logging.py; }
check_torch2_dtypes() { gpu_pytest torch2_dtypes test_torch2_dtypes.py; }
check_python_replay_cuda() { gpu_pytest python_replay_cuda test_replay_cuda.py; }
check_guard_run_torch() { gpu_pytest guard_run_torch test_guard_run_torch.py; }
check_pytest_guard_cuda() { gpu_pytest pytest_guard_cuda test_pytest_guard_cuda.py; }

sanitizer() { command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null; }

check_sanitizer_catches() {
  local cs; cs=$(sanitizer) || { note="compute-sanitizer not found"; return 77; }
  local ok=1 side out
  for side in tail head; do
    out=$(limited "$cs" --tool memcheck "$build/tests/gpu/gpu_cudart_write_past" "$side" 2>&1)
    echo "$out"
    if grep -q 'Invalid __global__ write of size 4' <<<"$out"; then note+="$side: caught ($(grep -o 'ERROR SUMMARY: [0-9]* error' <<<"$out")); "
    else note+="$side: not caught; "; ok=0; fi
  done
  [ $ok -eq 1 ]
}

time_of() {  # runs "$@", prints seconds; fails when the command fails
  local t0; t0=$(now)
  limited "$@" >>"$work/timed.log" 2>&1 || { echo "failed: $* (exit $?)" >&2; return 1; }
  elapsed "$t0"
}
check_sanitizer_vs_guard() {
  local cs; cs=$(sanitizer) || { note="compute-sanitizer not found"; return 77; }
  local prog=$build/tests/gpu/gpu_cudart_write_past plain guarded sanitized
  : >"$work/timed.log"
  plain=$(time_of "$prog" clean "$rounds") || { note="clean run failed"; return 1; }
  guarded=$(time_of "$bin/mate" guard-run --mode tail -- "$prog" clean "$rounds") || { note="clean run under mate guard-run failed"; return 1; }
  sanitized=$(time_of "$cs" --tool memcheck --error-exitcode 3 "$prog" clean "$rounds") ||
    { note="compute-sanitizer reported errors on the clean workload (or failed)"; return 1; }
  cat "$work/timed.log"
  note=$(awk -v p="$plain" -v g="$guarded" -v s="$sanitized" -v r="$rounds" 'BEGIN {
    printf "clean workload (%d rounds x 4 cudaMalloc/kernel/copy/cudaFree): plain %.2fs, mate guard-run %.2fs (%.1fx plain), compute-sanitizer memcheck %.2fs (%.1fx plain); sanitizer/guard %.1fx, no errors reported",
      r, p, g, g / p, s, s / p, s / g }')
}

dumps=$work/dumps
check_dump_replay_guard() {
  rm -rf "$dumps"
  MATE_LOGLEVEL=10 MATE_DUMP_DIR=$dumps MATE_WORKSPACE_BASE=$work/ops_workspace \
    limited "$build/tests/gpu/gpu_ops_compare" >"$work/dumping.log" 2>&1 ||
    { tail -20 "$work/dumping.log"; note="gpu_ops_compare failed at MATE_LOGLEVEL=10"; return 1; }
  local calls cuda_calls
  calls=$(find "$dumps" -name call.json | wc -l)
  cuda_calls=$(find "$dumps" -name call.json -exec grep -l '"cuda' {} + 2>/dev/null | wc -l)
  echo "dumped $calls calls ($cuda_calls with CUDA tensors) under $dumps"
  [ "$cuda_calls" -gt 0 ] || { note="no call with CUDA tensors was dumped ($calls calls)"; return 1; }
  local out rc
  out=$(limited "$bin/mate" replay --dir "$dumps" --guard-alloc --guard-mode tail 2>&1); rc=$?
  echo "$out"
  # gpu_ops_compare makes calls that raise on purpose (bad m_indices): replay runs them again and
  # reports "no reference: raised again, as in the original call", which never counts as passed
  # (docs/dumps-and-replay.md), so replay exits 1. PASS when those are the only calls not passed.
  local totals passed failed raised_again
  totals=$(tail -1 <<<"$out")
  passed=$(sed -n 's/^\([0-9]*\) passed, [0-9]* failed$/\1/p' <<<"$totals")
  failed=$(sed -n 's/^[0-9]* passed, \([0-9]*\) failed$/\1/p' <<<"$totals")
  raised_again=$(grep -c "no reference: raised again, as in the original call" <<<"$out")
  note="dumped $calls calls ($cuda_calls on CUDA); replay --guard-alloc: $totals ($raised_again raised again, as in the original call)"
  [ -n "$failed" ] || { note="$note; no totals line from replay (exit $rc)"; return 1; }
  [ "$passed" -gt 0 ] && [ "$failed" -eq "$raised_again" ] && [ "$rc" -le 1 ]
}

check_torch_load_dump() {
  [ -d "$dumps" ] || { check_dump_replay_guard >"$work/dump_for_load.log" 2>&1 || true; }
  local files
  files=$(find "$dumps" -name '*.pt' 2>/dev/null | sort)
  if [ -z "$files" ]; then
    note="the dumps have no .pt files (format: $(find "$dumps" -path '*inputs/*' -type f 2>/dev/null | sed 's/.*\.//' | sort -u | tr '\n' ' ')); the torch.save format has not landed"
    return 77
  fi
  local out rc
  out=$(printf '%s\n' $files | "$python" -c '
import sys, torch
n = cuda = 0
paths = sys.stdin.read().split()
for path in paths:
    t = torch.load(path)                      # PyTorch 2.x: weights_only=True by default
    tensors = [t] if isinstance(t, torch.Tensor) else [v for v in (t.values() if isinstance(t, dict) else t) if isinstance(v, torch.Tensor)]
    assert tensors, f"{path}: loaded {type(t).__name__}, no tensor"
    for x in tensors:
        n += 1
        cuda += x.is_cuda
print(f"torch {torch.__version__}: {n} tensors loaded from {len(paths)} files (weights_only default), {cuda} on CUDA")
' 2>&1); rc=$?
  echo "$out"
  # Device tensors load on the CPU (their device is in call.json): count the files of CUDA calls.
  local from_cuda=0 f
  for f in $files; do grep -q '"cuda' "$(dirname "$(dirname "$f")")/call.json" 2>/dev/null && from_cuda=$((from_cuda + 1)); done
  note="$(echo "$files" | wc -l) .pt files ($from_cuda of calls with CUDA tensors): $(tail -1 <<<"$out")"
  return $rc
}

check_vmm_costs() {
  local out rc
  out=$(limited "$build/tests/gpu/vmm_costs" 50 2>&1); rc=$?
  echo "$out"
  [ "$rc" -eq 0 ] || { note="exit $rc: $(tail -1 <<<"$out")"; return 1; }
  note=$(grep "granule" <<<"$out" | sed 's/^vmm_costs: //' | tr '\n' ' ')
}

run_check() {
  local c=$1 t0 rc
  note=""
  t0=$(now)
  "check_$c" >"$(log_of "$c")" 2>&1
  rc=$?
  local seconds; seconds=$(elapsed "$t0")
  note=$(tr '|\n' '/ ' <<<"$note")
  case $rc in
    0) record "$c" PASS "$seconds" "$note" ;;
    77) record "$c" SKIP "$seconds" "$note" ;;
    *) record "$c" FAIL "$seconds" "$note (log: $(log_of "$c"))"; tail -15 "$(log_of "$c")" | sed 's/^/    /' ;;
  esac
}

# --- main ---------------------------------------------------------------------------------
table=$work/gpu-results.md
would_run=()
setup_seconds="-"
# Written after the setup and after every check, and copied to $OUT, so that a run stopped at the
# device tool's time limit still brings back what it had.
write_table() {
  {
    echo "# MATE device check, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Device: $device; driver: $driver; CUDA: $cuda_version; $os; $cxx_version; $(nproc) cores."
    echo "Setup (unpack carry, configure, build): ${setup_seconds}s; total so far $(elapsed "$start")s."
    echo
    echo "| check | result | time (s) | what was seen |"
    echo "|---|---|---|---|"
    local r c res secs n
    for r in "${results[@]}"; do
      IFS='|' read -r c res secs n <<<"$r"
      echo "| \`$c\` | $res | $secs | $n |"
    done
    for c in "${would_run[@]}"; do
      echo "| \`$c\` | not run (no GPU) | - | would run: ${about[$c]} |"
    done
  } >"$table"
  if [ -n "${OUT:-}" ]; then
    cp "$table" "$OUT/gpu-results.md"
    # The logs come back too (the device tool returns at most 8 files).
    (cd "$work" && tar -czf "$OUT/device-check-logs.tar.gz" ./*.log) 2>/dev/null || true
  fi
}

start=$(now)
built_now=0
echo "device_check: $device, driver $driver, CUDA $cuda_version, $os, $cxx_version, $(nproc) cores"
needs_mate_build=0
for c in "${selected[@]}"; do [ "$c" = carry_packages ] || needs_mate_build=1; done
if [ "$needs_mate_build" -eq 0 ]; then   # --only carry_packages: the carry alone, no MATE build
  built_now=0
  unpack_carry
elif [ -z "$only" ] || [ ! -f "$build/build.ninja" ]; then
  t0=$(now)
  built_now=1
  unpack_carry
  set_carried_package_args
  setup_ok=1
  if [[ " ${selected[*]} " == *" carry_packages "* ]]; then
    run_check carry_packages
    [ "$failed" -eq 0 ] || setup_ok=0   # MATE's build would fail the same way
  fi
  if [ "$setup_ok" -eq 0 ]; then :
  elif ! { write_table; configure; }; then record configure FAIL "$(elapsed "$t0")" "log: $(log_of configure)"; setup_ok=0
  elif ! build; then record build FAIL "$(elapsed "$t0")" "log: $(log_of build)"; setup_ok=0; fi
  setup_seconds=$(elapsed "$t0")
  echo "device_check: unpack + configure + build: ${setup_seconds}s"
  if [ "$setup_ok" -eq 0 ]; then write_table; cat "$table"; exit 2; fi
fi
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

set_carried_package_args
for c in "${selected[@]}"; do
  [ "$c" = carry_packages ] && [ "$built_now" -eq 1 ] && continue   # ran before the build
  if [ "$no_gpu" -eq 1 ] && [[ "$no_gpu_checks" != *" $c "* ]]; then
    would_run+=("$c")
    continue
  fi
  run_check "$c"
  write_table
done
write_table
echo
cat "$table"
exit "$failed"
