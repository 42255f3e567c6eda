#!/usr/bin/env bash
# Every test: set up, build with AddressSanitizer + UndefinedBehaviorSanitizer and run the tests,
# then build the normal configuration (warnings as errors) and run every test there.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan
cmake --preset default >/dev/null
cmake --build --preset default
ctest --preset default
