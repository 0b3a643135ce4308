#!/usr/bin/env bash
# `posenc generate --config` with many positions in bounded memory (docs/own-model.md): a
# llama-3-8b call of 320 positions (2 x 320 x 320 scores; about 40 MiB peak, the
# T^2 scores once held in mp50 took 120 MiB) must peak under POSENC_TEST_MAX_RSS_KIB (default 64 MiB,
# the VmHWM of the process, polled while it runs) and its output must pass `posenc check --data`.
# Usage: generate_memory_test.sh POSENC SOURCE_DIR WORK_DIR
set -u
posenc=$1 src=$2 work=$3
cap_kib=${POSENC_TEST_MAX_RSS_KIB:-65536}
rm -rf "$work"
mkdir -p "$work"
"$posenc" generate --config "$src/golden/presets/llama-3-8b.json" --positions 0-319 --out "$work/out" \
  2>"$work/generate.log" &
pid=$!
peak=0
while kill -0 "$pid" 2>/dev/null; do
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
  [[ -n "$hwm" && "$hwm" -gt "$peak" ]] && peak=$hwm
  sleep 0.1
done
wait "$pid"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: generate --config exited $rc"; cat "$work/generate.log"; exit 1
fi
echo "generate --config, 320 positions: peak RSS ${peak} KiB (cap ${cap_kib} KiB)"
if [[ "$peak" -eq 0 || "$peak" -gt "$cap_kib" ]]; then
  echo "FAIL: peak RSS ${peak} KiB is not within (0, ${cap_kib}] KiB"; exit 1
fi
if ! "$posenc" check --data "$work/out" >"$work/check.log" 2>&1; then
  echo "FAIL: posenc check --data on the generated cases"; cat "$work/check.log"; exit 1
fi
echo "PASS"
