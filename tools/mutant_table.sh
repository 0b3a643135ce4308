#!/usr/bin/env bash
# Prints the mutant table of docs/mutants.md (between the markers
# <!-- mutant-table:begin --> and <!-- mutant-table:end -->): one row per mutant with its test
# binary and the tests that fail with it, from tools/mutant_matrix.sh. Usage:
#   tools/mutant_table.sh [build-dir]            runs the matrix (every mutant binary; minutes)
#   tools/mutant_table.sh --from MATRIX_FILE     formats a saved mutant_matrix.sh output
# Exits 1 when a mutant survives (no test fails with it): fix the tests before pasting the table.
# The ctest entry docs.mutant_table checks that the table names exactly the mutants CMake finds.
set -euo pipefail
if [ "${1:-}" = "--from" ]; then
  matrix=$(cat "$2")
else
  matrix=$("$(dirname "$0")/mutant_matrix.sh" "${1:-build}")
fi
shown=3  # tests named per row; the rest are counted
echo "| mutant | binary | killed by |"
echo "|---|---|---|"
survivors=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  key=${line%%:*}
  label=${key%%.*}
  mutant=${key#*.}
  tests=${line#*: }
  if [ "$tests" = "NOTHING FAILS" ]; then
    echo "| \`$mutant\` | \`$label\` | **nothing: survives** |"
    survivors=$((survivors + 1))
    continue
  fi
  read -r -a list <<<"$tests"
  n=${#list[@]}
  cell=""
  for ((i = 0; i < n && i < shown; i++)); do
    cell+="${cell:+, }\`${list[$i]}\`"
  done
  [ "$n" -gt "$shown" ] && cell+=" and $((n - shown)) more"
  echo "| \`$mutant\` | \`$label\` | $n: $cell |"
done <<<"$(sort <<<"$matrix")"
if [ "$survivors" -gt 0 ]; then
  echo "mutant_table: $survivors mutant(s) survive" >&2
  exit 1
fi
