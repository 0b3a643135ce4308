#!/usr/bin/env bash
# Crash-safe writes of `posenc generate` (docs/bad-input.md, "Crash-safe writes"):
#  1. generate is SIGKILLed at several points (after fixed delays and after its Nth progress
#     line); every file left in the folder is then either complete, with the SHA-256 the
#     committed catalog lists for it, or a temp file named .posenc.<pid>.<n>.tmp, which no
#     reader takes; `posenc catalog` then recovers a valid catalog of the complete cases, and a
#     new generate into the same folder finishes it and sweeps the temp files away.
#  2. two generates into one folder at the same time: both finish, or one is refused with the
#     lock message; the catalog left is valid. Two shards (--no-catalog) share the folder.
#  3. generate and check ended by SIGINT or SIGTERM leave no temporary file, no spill file and
#     no scratch folder, in the output folder or in $TMPDIR (spill files are unlinked as soon as
#     they are created: none is ever seen there, not even while the run is under way).
# Run by ctest as tools/crash_test.sh <posenc> <source dir> <scratch dir> [passes]
set -u
export LC_ALL=C
POSENC=$1
SRC=$2
WORK=$3
PASSES=${4:-1}
DATA="$SRC/golden/data"
SCHEMES=(--scheme "${POSENC_CRASH_SCHEME:-learned}")
rm -rf "$WORK"
mkdir -p "$WORK"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# "<file> <sha256>" for every file a catalog lists.
pairs() {
  awk -F'"' '/"(manifest|tensors)": /{p=$4} /"(manifest|tensors)_sha256": /{print p, $4}' "$1" | sort
}
pairs "$DATA/catalog.json" >"$WORK/golden.pairs"
scheme=${SCHEMES[1]}
grep "^$scheme/" "$WORK/golden.pairs" >"$WORK/scheme.pairs"

# check_folder DIR: every file complete and as committed, or a clearly named temp file (their
# count in TEMPS).
check_folder() {
  local dir=$1 f rel sha
  TEMPS=0
  while IFS= read -r f; do
    rel=${f#"$dir"/}
    case $rel in
      .posenc.lock) [ -s "$f" ] && fail "$dir: lock file is not empty" ;;
      catalog.json)
        pairs "$f" | comm -23 - "$WORK/golden.pairs" | grep -q . &&
          fail "$dir: catalog.json lists a file unlike the committed one" ;;
      */.posenc.[0-9]*.[0-9]*.tmp | .posenc.[0-9]*.[0-9]*.tmp)
        TEMPS=$((TEMPS + 1)) ;;
      *)
        sha=$(sha256sum "$f" | cut -d' ' -f1)
        grep -qx "$rel $sha" "$WORK/golden.pairs" || fail "$dir: $rel is partial or unknown" ;;
    esac
  done < <(find "$dir" ! -type d)
}

# recover DIR: posenc catalog lists exactly the complete cases (their count in LISTED), as the
# committed catalog does.
recover() {
  local dir=$1 complete
  "$POSENC" catalog --data "$dir" >/dev/null 2>&1 || fail "$dir: posenc catalog failed"
  pairs "$dir/catalog.json" | comm -23 - "$WORK/golden.pairs" | grep -q . &&
    fail "$dir: recovered catalog lists a file unlike the committed one"
  complete=0
  for m in "$dir/$scheme"/*.json; do
    [ -f "$m" ] && [ -f "${m%.json}.safetensors" ] && complete=$((complete + 1))
  done
  LISTED=$(grep -c '"manifest_sha256"' "$dir/catalog.json")
  [ "$complete" = "$LISTED" ] || fail "$dir: $complete complete cases, the catalog lists $LISTED"
}

# kill_after DIR WHEN: runs generate into DIR and SIGKILLs it after WHEN (seconds, or "lineN":
# after its Nth progress line).
kill_after() {
  local dir=$1 when=$2 pid
  "$POSENC" generate "${SCHEMES[@]}" --out "$dir" 2>"$dir.log" &
  pid=$!
  if [[ $when == line* ]]; then
    while [ "$(wc -l <"$dir.log")" -lt "${when#line}" ] && kill -0 "$pid" 2>/dev/null; do
      sleep 0.005
    done
  else
    sleep "$when"
  fi
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

runs=0
for ((pass = 0; pass < PASSES; pass++)); do
  for when in 0.05 0.15 line1 line2 0.4 line4; do
    dir="$WORK/kill_${pass}_$when"
    kill_after "$dir" "$when"
    [ -d "$dir" ] || mkdir -p "$dir"
    check_folder "$dir"
    recover "$dir"
    echo "killed after $when: $LISTED complete cases recovered, $TEMPS temp file(s) left"
    runs=$((runs + 1))
  done
done
# A new generate into a killed folder completes it and sweeps the temp files.
"$POSENC" generate "${SCHEMES[@]}" --out "$dir" >/dev/null 2>&1 || fail "generate after a kill failed"
check_folder "$dir"
[ "$TEMPS" = 0 ] || fail "generate after a kill left temp files"
cmp -s <(pairs "$dir/catalog.json") "$WORK/scheme.pairs" || fail "generate after a kill: catalog differs"

# Two generates into one folder at once.
dir="$WORK/concurrent"
"$POSENC" generate "${SCHEMES[@]}" --out "$dir" >"$dir.a.log" 2>&1 &
a=$!
"$POSENC" generate "${SCHEMES[@]}" --out "$dir" >"$dir.b.log" 2>&1 &
b=$!
wait $a
rc_a=$?
wait $b
rc_b=$?
for x in "a $rc_a" "b $rc_b"; do
  set -- $x
  if [ "$2" = 2 ]; then
    grep -q "another posenc process is writing into this folder" "$dir.$1.log" ||
      fail "concurrent generate $1: exit 2 without the lock message: $(cat "$dir.$1.log")"
  elif [ "$2" != 0 ]; then
    fail "concurrent generate $1: exit $2: $(tail -3 "$dir.$1.log")"
  fi
done
[ "$rc_a" = 0 ] || [ "$rc_b" = 0 ] || fail "concurrent generates: neither finished"
check_folder "$dir"
[ "$TEMPS" = 0 ] || fail "concurrent generates left temp files"
cmp -s <(pairs "$dir/catalog.json") "$WORK/scheme.pairs" || fail "concurrent generates: catalog differs"
echo "concurrent generates: exit $rc_a and $rc_b$(grep -h -m1 -o 'another posenc process is writing into this folder' "$dir".?.log | sed 's/^/ (/; s/$/)/')"

# Two shards at once share the folder; the catalog after them is the committed one's.
dir="$WORK/shards"
"$POSENC" generate "${SCHEMES[@]}" --shard 0/2 --no-catalog --out "$dir" 2>"$dir.0.log" &
a=$!
"$POSENC" generate "${SCHEMES[@]}" --shard 1/2 --no-catalog --out "$dir" 2>"$dir.1.log" &
b=$!
wait $a || fail "shard 0/2: $(tail -2 "$dir.0.log")"
wait $b || fail "shard 1/2: $(tail -2 "$dir.1.log")"
"$POSENC" catalog --data "$dir" >/dev/null 2>&1 || fail "catalog after shards failed"
cmp -s <(pairs "$dir/catalog.json") "$WORK/scheme.pairs" || fail "shards: catalog differs"

# SIGINT and SIGTERM: the temporary files and spill files of the run go with it.
for sig in INT TERM; do
  tmp="$WORK/tmpdir_$sig"
  mkdir -p "$tmp"
  dir="$WORK/signal_$sig"
  # A call of 1500 positions: its scores are spilled to temp files while they stream.
  TMPDIR="$tmp" "$POSENC" generate --config "$SRC/golden/presets/llama-2-7b.json" \
    --positions 0-1499 --out "$dir" 2>"$dir.log" &
  pid=$!
  sleep 3
  seen=$(find "$tmp" -mindepth 1 | wc -l)
  kill -"$sig" "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rc=$?
  left=$(find "$tmp" "$dir" -name '.posenc.*.tmp' -o -name 'posenc-spill-*' -o -name 'posenc-check-*' | wc -l)
  [ "$seen" = 0 ] || fail "SIG$sig: $seen file(s) in TMPDIR while generate ran"
  [ "$left" = 0 ] || fail "SIG$sig: generate left $left temporary file(s)"
  [ "$rc" -gt 128 ] || fail "SIG$sig: generate ended with exit $rc, not by the signal"
  echo "generate ended by SIG$sig (exit $rc): nothing left in TMPDIR or the output folder"
  TMPDIR="$tmp" "$POSENC" check >/dev/null 2>&1 &
  pid=$!
  sleep 1
  kill -"$sig" "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  left=$(find "$tmp" -mindepth 1 | wc -l)
  [ "$left" = 0 ] || fail "SIG$sig: check left $left file(s) in TMPDIR: $(find "$tmp" -mindepth 1 | head -3)"
  echo "check ended by SIG$sig: its scratch folder removed"
done

echo "crash test: $runs kills, $failures failures"
[ "$failures" -eq 0 ]
