#!/usr/bin/env bash
# The main job: set up, build, and show MATE at work. Grows with each component.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
mate=build/default/bin/mate

echo; echo "== mate version"; "$mate" version
echo; echo "== mate env (what this shell sets)"; "$mate" env
echo; echo "== a typo and an invalid value, as a launch script would check them"
MATE_LOGLEVL=3 MATE_DEEPGEMM_MK_ALIGNMENT=64 "$mate" env --check || echo "(mate env --check exited $?)"
echo; echo "== mate env --all (every public variable)"; "$mate" env --all
