#!/usr/bin/env bash
# The output rule against a path that changes under it (docs/bad-input.md, "Output files"):
# `verify --report` runs again and again while another process swaps a symbolic link on the
# report's path, and every input must come out byte-identical, with no temporary file left.
#   1. --report r.html, r.html flipping between a posenc page and the --actual file;
#   2. --report dl/good.safetensors, dl flipping between a decoy folder and the input's folder.
# Each loop runs N verify commands (default 200). Run by ctest as
#   tools/race_test.sh <posenc> <source dir> <scratch dir> [N]
set -u
export LC_ALL=C
POSENC=$1
SRC=$2
WORK=$3
N=${4:-200}
# Under a sanitizer every run is several times slower: the loops are shorter there.
[ -n "${POSENC_SANITIZED:-}" ] && N=$((N / 4))
MAN="$SRC/golden/data/learned/learned_p1024_d64_gpt2_f32.json"
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || exit 2
failures=0

# flip LINK A B: makes LINK name A, then swaps it between A and B (atomic renames) until killed.
flip() {
  ln -sfn "$2" "$1"
  python3 -c '
import os, sys
link, a, b = sys.argv[1:4]
tmp = link + ".flip"
while True:
    for t in (a, b):
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        os.symlink(t, tmp)
        os.replace(tmp, link)
' "$1" "$2" "$3" &
  FLIPPER=$!
}

# run_loop NAME ARGS...: N runs of posenc ARGS; counts the exit codes (0 and 2 expected: a
# report written, or refused because the path named an input at its check).
run_loop() {
  local name=$1 i rc ok=0 refused=0 other=0
  shift
  for ((i = 0; i < N; i++)); do
    timeout 30 "$POSENC" "$@" >/dev/null 2>&1
    rc=$?
    case $rc in
      0) ok=$((ok + 1)) ;;
      2) refused=$((refused + 1)) ;;
      *) other=$((other + 1)) ;;
    esac
  done
  echo "$name: $N runs: $ok wrote the report, $refused refused, $other other"
  if [ "$other" -ne 0 ]; then
    echo "FAIL: $name: $other runs ended with an exit code other than 0 or 2"
    failures=$((failures + 1))
  fi
}

# same FILE SHA: FILE still holds SHA's bytes.
same() {
  if [ "$(sha256sum "$1" | cut -d' ' -f1)" != "$2" ]; then
    echo "FAIL: $1 changed (an input posenc must never write)"
    failures=$((failures + 1))
  else
    echo "ok: $1 byte-identical"
  fi
}

no_temps() {
  local left
  left=$(find "$WORK" -name '.posenc.*.tmp' -o -name '*.tmp.*' | sed "s|$WORK/||")
  if [ -n "$left" ]; then
    echo "FAIL: temporary files left: $left"
    failures=$((failures + 1))
  else
    echo "ok: no temporary file left"
  fi
}

"$POSENC" engine "$MAN" --out good.safetensors 2>/dev/null || exit 2
"$POSENC" verify "$MAN" --actual good.safetensors --report page.html >/dev/null 2>&1 || exit 2
good=$(sha256sum good.safetensors | cut -d' ' -f1)

# 1. The report's own name flips between a posenc page and the engine output being verified.
flip r.html page.html good.safetensors
run_loop "report link flipping onto the --actual file" verify "$MAN" --actual good.safetensors --report r.html
kill "$FLIPPER" 2>/dev/null
wait "$FLIPPER" 2>/dev/null
same good.safetensors "$good"

# 2. A folder on the report's path flips between a decoy folder and the input's folder.
mkdir -p in decoy
cp good.safetensors in/good.safetensors
flip dl decoy in
run_loop "report folder flipping onto the input's folder" verify "$MAN" --actual in/good.safetensors --report dl/good.safetensors
kill "$FLIPPER" 2>/dev/null
wait "$FLIPPER" 2>/dev/null
same in/good.safetensors "$good"
no_temps

if [ "$failures" -ne 0 ]; then
  echo "race_test: $failures failure(s)"
  exit 1
fi
echo "race_test: inputs intact after $((2 * N)) runs against a flipping path"
