#!/usr/bin/env bash
# Installs MATE's build and test dependencies from Debian packages, and nothing else.
# Idempotent: apt-get runs only when a package is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libfmt-dev nlohmann-json3-dev libcli11-dev libdlpack-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libxxhash-dev zlib1g-dev
  python3 python3-numpy python3-torch python3-pytest python3-pybind11 pybind11-dev python3-dev python3-pytest-xdist
  electric-fence duma time valgrind
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
