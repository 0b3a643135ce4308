#!/usr/bin/env bash
# The sanitizer pass of CI: configures a separate build with AddressSanitizer and
# UndefinedBehaviorSanitizer (-DPOSENC_SANITIZE=address,undefined, no mutants, -O1), builds a
# subset of the test binaries and the posenc program, runs their ctest entries, and fails on a
# failing test or on any sanitizer report. Usage:
#   tools/sanitize.sh [build-dir]          default build-asan
# Environment:
#   POSENC_SANITIZE          sanitizer list (default address,undefined)
#   POSENC_SANITIZE_LABELS   ctest label regex (default below); the binaries built follow it
#   POSENC_SANITIZE_CMAKE_ARGS  extra -D options
# The subset (what fits about 15 minutes of CI on 2 cores, cold): `posenc` (cli.bad_input reads
# every row of docs/bad-input.md's table through it, cli.crash kills generate mid-run; the long
# cli.end_to_end, 335 s under ASan, is left to the main run), posenc_common_test (the
# safetensors, .npy, manifest and catalog readers and the verifier) and the learned and sinusoidal
# scheme binaries (optimized kernels with OpenMP, the mp oracle, golden round trips).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-asan}"
sanitize="${POSENC_SANITIZE:-address,undefined}"
labels="${POSENC_SANITIZE_LABELS:-common|learned|sinusoidal|input|crash}"
targets=(posenc)
for l in ${labels//|/ }; do
  case "$l" in cli|input|crash) ;; *) targets+=("posenc_${l}_test") ;; esac  # scripts: posenc only
done
launcher=()
command -v ccache >/dev/null && [ -z "${CCACHE_DISABLE:-}" ] && \
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$(date +%s)
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOSENC_MUTANTS=OFF \
      -DPOSENC_PCH=OFF "${launcher[@]}" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
      -DPOSENC_SANITIZE="$sanitize" ${POSENC_SANITIZE_CMAKE_ARGS:-} >/dev/null
# The build runs each test binary to list its tests: a finding there fails the build.
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
built=$(date +%s)
# Every report goes to a file under $logs (and ends the process: -fno-sanitize-recover=all);
# exit code 86 keeps a sanitizer death apart from posenc's own exit codes 1 and 2.
logs="$(pwd)/$build/sanitizer-logs"
rm -rf "$logs" && mkdir -p "$logs"
common="exitcode=86:log_path=$logs/report:print_stacktrace=1"
export ASAN_OPTIONS="$common:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="$common:halt_on_error=1"
status=0
ctest --test-dir "$build" -j "$(nproc)" -L "^(${labels})\$" -LE mutant --output-on-failure \
  --timeout 600 || status=1
end=$(date +%s)
if compgen -G "$logs/report*" >/dev/null; then
  echo "sanitize: sanitizer reports:" >&2
  cat "$logs"/report* >&2
  status=1
fi
echo "sanitize: $sanitize, labels ${labels}: build $((built - start)) s, tests $((end - built)) s," \
     "$([ $status -eq 0 ] && echo clean || echo FAILED)"
exit $status
