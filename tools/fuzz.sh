#!/usr/bin/env bash
# The fuzzing pass of CI: builds the libFuzzer targets of the readers (fuzz/, clang++,
# -DPOSENC_FUZZ=ON) and runs each on its committed seed corpus for a bounded time (ctest -L fuzz).
# Usage:
#   tools/fuzz.sh [build-dir]                  default build-fuzz
#   POSENC_FUZZ_SECONDS=300 tools/fuzz.sh      the longer run (seconds per target)
# A crash, a sanitizer report, an unexpected exception or a hang fails it; the input that did it
# is saved as <build-dir>/fuzz/fuzz_artifacts/<target>-crash-<sha1> (replay: run the target with
# that file as its argument).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-fuzz}"
seconds="${POSENC_FUZZ_SECONDS:-12}"
launcher=()
command -v ccache >/dev/null && [ -z "${CCACHE_DISABLE:-}" ] && \
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
      "${launcher[@]}" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DPOSENC_FUZZ=ON \
      -DPOSENC_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build "$build" -j "$(nproc)"
built=$(date +%s)
status=0
ctest --test-dir "$build" -j "$(nproc)" -L fuzz --output-on-failure \
  --timeout $((seconds * 3 + 60)) || status=1
end=$(date +%s)
echo "fuzz: ${seconds} s per target: build $((built - start)) s, runs $((end - built)) s," \
     "$([ $status -eq 0 ] && echo clean || echo FAILED)"
exit $status
