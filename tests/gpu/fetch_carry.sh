#!/usr/bin/env bash
# Run on the development machine (Debian, with network): downloads — `apt-get download`, nothing
# installed — the Debian packages MATE's build needs that the lent GPU machine's image lacks, into
# an ignored folder of the checkout that the device tool's `carry` sends along. On the GPU machine
# tests/gpu/device_check.sh unpacks them with `dpkg -x` into a private prefix (never /).
#
# Usage: tests/gpu/fetch_carry.sh [DEST]   (default: build/gpu-carry/debs, under the ignored build/)
# Prints the total size and the `carry` path to give the device tool's `run`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:-$root/build/gpu-carry/debs}

# What MATE's configure and the device targets need (scripts/setup.sh's list, less what the image
# has: compiler, cmake, ninja, Python, PyTorch), with the runtime library a -dev package links to.
# GoogleTest's CMake package ships the prebuilt static libraries (libgtest-dev, libgmock-dev), so
# the `googletest` source package is not needed. xxhash is used header-only (no libxxhash0).
packages=(
  libfmt-dev libfmt9          # fmt: headers, CMake package, libfmt.so -> libfmt.so.9 (runtime)
  nlohmann-json3-dev          # header-only
  libcli11-dev                # header-only
  libdlpack-dev               # header-only
  libxxhash-dev               # xxhash.h (used header-only)
  libgtest-dev libgmock-dev   # GoogleTest / gMock headers, static libraries, CMake package
  pybind11-dev                # the Python extension's bindings (headers, CMake package)
)
# Limit of the device tool's whole working tree (carry included): 64 MiB. The debs take ~4 MiB.
limit_bytes=$((40 * 1024 * 1024))

command -v apt-get >/dev/null || { echo "fetch_carry: apt-get not found (this needs a Debian/Ubuntu machine)" >&2; exit 1; }
[ "$(dpkg --print-architecture)" = amd64 ] || echo "fetch_carry: note: this machine is $(dpkg --print-architecture); downloading amd64 packages for the GPU machine"

mkdir -p "$dest"
rm -f "$dest"/*.deb
# amd64 whatever this machine is: the GPU machine is x86-64.
(cd "$dest" && apt-get download -q -o APT::Architecture=amd64 "${packages[@]/%/:amd64}") || {
  echo "fetch_carry: apt-get download failed; if it says 'Unable to locate package', run 'sudo apt-get update' first" >&2
  exit 1
}

count=$(ls "$dest"/*.deb | wc -l)
if [ "$count" -ne "${#packages[@]}" ]; then
  echo "fetch_carry: expected ${#packages[@]} .deb files in $dest, found $count" >&2
  exit 1
fi
bytes=$(du -cb "$dest"/*.deb | tail -1 | cut -f1)
if [ "$bytes" -gt "$limit_bytes" ]; then
  echo "fetch_carry: $bytes bytes is over the $limit_bytes bytes kept for the carry" >&2
  exit 1
fi
# The device tool sends ignored files only when `carry` names them: check the folder is ignored
# (so it is not committed either) and name the path relative to the checkout.
rel=${dest#"$root"/}
if ! git -C "$root" check-ignore -q "$rel"; then
  echo "fetch_carry: warning: $rel is not ignored by git; it would be committed and sent as part of the tree" >&2
fi
ls -l "$dest"
echo "carry size: $(( (bytes + 1023) / 1024 )) KiB in $count packages"
echo "carry path for the device tool's run: [\"$rel\"]"
