#!/usr/bin/env bash
# Prints, for every mutant of every test binary, the tests that fail with it (no fail-fast, no
# shrinking). A mutant with an empty list is a defect of the test suite. Usage:
#   tools/mutant_matrix.sh [build-dir] [binary-label...]      e.g. tools/mutant_matrix.sh build rope
set -euo pipefail
build="${1:-build}"
shift || true
labels=("$@")
if [ "${#labels[@]}" -eq 0 ]; then
  mapfile -t labels < <(ctest --test-dir "$build" -N -L mutant | grep -o 'mutant\.[a-z0-9_]*\.none' | sed 's/mutant\.//; s/\.none//')
fi
for label in "${labels[@]}"; do
  bin="$build/posenc_${label}_test_mutant"
  for m in $(ctest --test-dir "$build" -N -L mutant | grep -o "mutant\.${label}\.[a-z0-9_]*" | sed "s/mutant\.${label}\.//" | grep -v '^none$'); do
    failed=$(POSENC_MUTANT="$m" RC_PARAMS="seed=${POSENC_TEST_SEED:-20261129} noshrink=1" "$bin" 2>/dev/null \
             | grep '^\[  FAILED  \] [A-Za-z]' | sed 's/\[  FAILED  \] //; s/ (.*//' | sort -u | tr '\n' ' ' || true)
    printf '%s.%s: %s\n' "$label" "$m" "${failed:-NOTHING FAILS}"
  done
done
