#!/usr/bin/env bash
# Installs the Debian 12 packages posenc needs (only those missing), then configures and builds
# into ./build (Release, Ninja). Safe to run again: it does only what is left to do.
# Environment: POSENC_BUILD_DIR (default build), POSENC_CMAKE_ARGS (extra -D options).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${POSENC_BUILD_DIR:-build}"
packages=(g++ cmake ninja-build pkg-config libboost-dev libmpfr-dev libgmp-dev libeigen3-dev
          librapidcheck-dev libgtest-dev nlohmann-json3-dev libcli11-dev python3-numpy python3-pytest
          python3-jsonschema chromium clang libclang-rt-14-dev
          libssl-dev patch)  # patch: the instrumented reference of the mutant build
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
    --no-install-recommends "${missing[@]}"
fi
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${POSENC_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
