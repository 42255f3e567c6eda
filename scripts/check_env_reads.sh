#!/usr/bin/env bash
# Fails when code outside the registry (src/config) reads the environment directly.
# Every MATE_* variable must be read through mate::config, so that `mate env`, the reference doc
# and the validation cover it. Files that must touch the environment for another reason are
# listed in scripts/env_reads_allowed.txt with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
allowed=$(grep -v '^#' scripts/env_reads_allowed.txt | awk '{print $1}' | grep -v '^$' || true)
found=0
while IFS= read -r hit; do
  file=${hit%%:*}
  if grep -qxF "$file" <<<"$allowed"; then continue; fi
  echo "direct environment read outside src/config: $hit"
  found=1
done < <(grep -rnE '\b(getenv|secure_getenv)\s*\(|\benviron\b' src include tests bench examples python 2>/dev/null \
           | grep -v '^src/config/' || true)
if [ "$found" -ne 0 ]; then
  echo "read MATE_* variables through mate::config (include/mate/config_variables.inc)"
  exit 1
fi
echo "ok: only src/config reads the environment"
