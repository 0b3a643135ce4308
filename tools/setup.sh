#!/usr/bin/env bash
# Installs the Debian 12 packages posenc needs (only those missing), then configures and builds
# into ./build (Release, Ninja). Safe to run again: it does only what is left to do.
#   tools/setup.sh           the build packages, then the `posenc` program only (the main job:
#                            build/posenc check)
#   tools/setup.sh --tests   also what the tests need (pytest, jsonschema, chromium for the HTML
#                            report test, clang and its sanitizer runtime for tools/fuzz.sh,
#                            patch for the mutant build), then every target: test binaries and
#                            their mutant twins
# Environment: POSENC_BUILD_DIR (default build), POSENC_CMAKE_ARGS (extra -D options).
set -euo pipefail
cd "$(dirname "$0")/.."
tests=0
case "${1:-}" in
  "") ;;
  --tests) tests=1 ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup.sh: unknown argument '$1' (want nothing or --tests)" >&2; exit 2 ;;
esac
build_dir="${POSENC_BUILD_DIR:-build}"
# CMake's configure step finds GoogleTest and RapidCheck (small header packages) either way.
packages=(g++ cmake ninja-build pkg-config libboost-dev libmpfr-dev libgmp-dev libeigen3-dev
          librapidcheck-dev libgtest-dev nlohmann-json3-dev libcli11-dev libssl-dev libre2-dev)
if [ "$tests" = 1 ]; then
  packages+=(python3-numpy python3-pytest python3-jsonschema chromium clang libclang-rt-14-dev
             patch)  # patch: the instrumented reference of the mutant build
fi
# Each phase says what it does and, when done, how long it took.
phase_start=$SECONDS
phase() { echo "setup: $1"; phase_start=$SECONDS; }
phase_done() { echo "setup: $1 ($((SECONDS - phase_start)) s)"; }
phase "checking ${#packages[@]} Debian packages"
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
  phase_done "installed ${#missing[@]} packages"
else
  phase_done "all packages present"
fi
phase "configuring $build_dir (CMake, Ninja, Release)"
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${POSENC_CMAKE_ARGS:-} >/dev/null
phase_done "configured"
if [ "$tests" = 1 ]; then
  phase "building every target on $(nproc) cores (the first build takes about 10-15 min on 2)"
  cmake --build "$build_dir" -j "$(nproc)"
else
  phase "building $build_dir/posenc on $(nproc) cores"
  cmake --build "$build_dir" -j "$(nproc)" --target posenc
fi
phase_done "built"
