#!/usr/bin/env bash
# usage: check_installed_aot.sh BUILD_DIR SCRATCH
# Installs MATE into a scratch prefix and checks that the installed `mate` finds the installed
# AOT modules (<prefix>/<libdir>/mate/aot) and that no build-only files were installed.
set -euo pipefail
build=$1 scratch=$2
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
manifest=$(find "$scratch/prefix" -path '*/mate/aot/manifest.json' | head -1)
[ -n "$manifest" ] || { echo "no AOT manifest installed"; exit 1; }
if find "$scratch/prefix" -path '*/mate/aot/*' -name obj | grep -q .; then echo "obj/ installed"; exit 1; fi
out=$(env -u MATE_DISABLE_JIT MATE_WORKSPACE_BASE="$scratch/ws" MATE_DISABLE_JIT=1 \
      "$scratch/prefix/bin/mate" module-status --filter aot)
echo "$out"
grep -q "mate_sample_axpy_f32_t64 .* aot" <<<"$out" || { echo "installed AOT module not found"; exit 1; }
grep -q "$(dirname "$manifest")" <<<"$out" || { echo "AOT directory not listed"; exit 1; }
