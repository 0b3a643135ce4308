#!/usr/bin/env bash
# The HTML report (`--report out.html`) opened in a real browser: Debian's chromium, headless.
# Writes the report of a failing engine (positions offset by one, diagnosed on the page) and of a
# passing one, renders both (--dump-dom, and a screenshot of the failing one), and checks the
# rendered DOM: the case table's rows, the SVG plots and heat maps, the worst elements, the
# diagnosis. Run by ctest (label browser) as
#   tools/browser_test.sh <posenc> <source dir> <scratch dir>
# Exit 77 (ctest: skipped) with a message when no chromium is installed.
set -euo pipefail
posenc="$1"
src="$2"
work="$3"
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  echo "SKIPPED: no chromium on PATH (tools/setup.sh installs Debian's chromium)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
case_id=rope_half_d128_b5e5_llama3_8b_f32
manifest="$src/golden/data/rope/$case_id.json"
fail=0
check() {  # check <file> <description> <extended regex> [minimum count]
  local n
  n=$(grep -E -o "$3" "$1" | wc -l || true)
  if [ "$n" -ge "${4:-1}" ]; then
    echo "ok: $2 ($n)"
  else
    echo "FAIL: $2: found $n of '$3' in $1 (want >= ${4:-1})"
    fail=1
  fi
}
render() {  # render <html> <dom out> [screenshot png]
  local extra=()
  [ $# -ge 3 ] && extra=(--screenshot="$3" --window-size=1280,2000)
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$work/profile" --dump-dom "${extra[@]}" "file://$1" >"$2" 2>"$2.log" || {
    echo "FAIL: chromium could not render $1"; cat "$2.log"; exit 1; }
}

"$posenc" engine "$case_id" --mistake offset --out "$work/bad.safetensors" >/dev/null 2>&1
"$posenc" engine "$case_id" --out "$work/good.safetensors" >/dev/null 2>&1
set +e
"$posenc" verify "$manifest" --actual "$work/bad.safetensors" --report "$work/bad.html" >/dev/null
rc_bad=$?
"$posenc" verify "$manifest" --actual "$work/good.safetensors" --report "$work/good.html" >/dev/null
rc_good=$?
set -e
[ "$rc_bad" -eq 1 ] || { echo "FAIL: verify of the offset engine exited $rc_bad, not 1"; fail=1; }
[ "$rc_good" -eq 0 ] || { echo "FAIL: verify of the correct engine exited $rc_good, not 0"; fail=1; }
! grep -E -q '<script|(src|href)="https?:' "$work/bad.html" || { echo "FAIL: the page has a script or a link out"; fail=1; }

render "$work/bad.html" "$work/bad.dom" "$work/shot.png"
render "$work/good.html" "$work/good.dom"
check "$work/bad.dom" "case table row" '<tr class="case-row">' 1
check "$work/bad.dom" "failing status" '<td class="FAIL">FAIL</td>' 1
check "$work/bad.dom" "error-against-position plots" '<svg class="plot"' 5
check "$work/bad.dom" "heat maps" '<svg class="heat"' 5
check "$work/bad.dom" "budget line" 'class="bound"' 5
check "$work/bad.dom" "heat map legend" 'class="legend"' 40
check "$work/bad.dom" "worst-element tables" '<table class="worst">' 5
check "$work/bad.dom" "the diagnosis" 'diagnosis: explained' 1
check "$work/bad.dom" "the fitted offset" 'positions offset by \+1' 1
check "$work/good.dom" "passing status" '<td class="PASS">PASS</td>' 1
check "$work/good.dom" "plots of the passing case" '<svg class="plot"' 5
if grep -q 'class="FAIL"' "$work/good.dom"; then echo "FAIL: the passing page shows a FAIL"; fail=1; fi
# The screenshot: a PNG of the requested size.
if [ "$(head -c 8 "$work/shot.png" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]; then
  echo "FAIL: no PNG screenshot"; fail=1
else
  echo "ok: screenshot $work/shot.png ($(wc -c <"$work/shot.png") bytes)"
fi
exit $fail
