#!/usr/bin/env bash
# The reference mutants live in tools/mutants/reference.patch, not in reference/: the source
# tree's reference/ reads as the formulas, and the patch re-adds the POSENC_MUTANT("name")
# branches to a copy of it. docs/mutants.md describes the workflow. Usage (from anywhere):
#
#   tools/mutant_patch.sh apply DIR   DIR/reference = reference/ + the patch (the instrumented
#                                     copy; files whose content did not change keep their time
#                                     stamps). Fails, naming the hunks, when the patch no longer
#                                     applies. The mutant build runs this into <build>/mutant-src.
#   tools/mutant_patch.sh edit DIR    the same, but applies every hunk it can and leaves the
#                                     others in DIR/reference/**/*.rej: fix them by hand in DIR.
#   tools/mutant_patch.sh save DIR    rewrites the patch as the diff reference/ -> DIR/reference
#                                     (after adding a mutant in DIR, or after `edit`).
#   tools/mutant_patch.sh check       does the patch apply to reference/? (exit 0 or 1)
#
# Hunks are applied exactly (no fuzz; a changed line count above a hunk is fine).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
patch_file="$src/tools/mutants/reference.patch"
usage() { sed -n '5,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
cmd=$1
die() { echo "mutant_patch.sh: $*" >&2; exit 1; }
stale() {
  die "tools/mutants/reference.patch no longer applies to reference/ ($1).
Refresh it: tools/mutant_patch.sh edit /tmp/mut, fix the hunks left in /tmp/mut/reference/**/*.rej
by hand in /tmp/mut/reference (the mutant branches around your change), then
tools/mutant_patch.sh save /tmp/mut."
}

# apply_into TMP [rejects]: TMP/reference = reference/ + the patch.
apply_into() {
  local tmp=$1 mode=${2:-strict} out
  rm -rf "$tmp"
  mkdir -p "$tmp"
  cp -R "$src/reference" "$tmp/reference"
  if ! command -v patch >/dev/null; then die "needs GNU patch (Debian: apt-get install patch)"; fi
  if [ "$mode" = strict ]; then
    if ! out=$(cd "$tmp" && patch -p1 --fuzz=0 --batch --forward --no-backup-if-mismatch \
                 --reject-file=- <"$patch_file" 2>&1); then
      awk '/^patching file /{f=$3} /^Hunk #[0-9]+ FAILED/{print "  " f ": " $0}' <<<"$out" >&2
      stale "$(grep -c '^Hunk #[0-9]* FAILED' <<<"$out" || true) hunk(s) failed"
    fi
  else
    (cd "$tmp" && patch -p1 --fuzz=0 --batch --forward --no-backup-if-mismatch <"$patch_file") ||
      echo "mutant_patch.sh: hunks left in $(cd "$tmp" && find reference -name '*.rej' | tr '\n' ' ')" >&2
  fi
}

case "$cmd" in
  apply)
    [ $# -eq 2 ] || usage
    dir=$2
    tmp="$dir.tmp"
    apply_into "$tmp"
    mkdir -p "$dir/reference"
    # Copy only what changed, so that a rebuild recompiles only what includes a changed header.
    (cd "$tmp" && find reference -type f) | while read -r f; do
      if ! cmp -s "$tmp/$f" "$dir/$f"; then
        mkdir -p "$(dirname "$dir/$f")"
        cp "$tmp/$f" "$dir/$f"
      fi
    done
    (cd "$dir" && find reference -type f) | while read -r f; do
      [ -e "$tmp/$f" ] || rm -f "$dir/$f"
    done
    rm -rf "$tmp"
    ;;
  edit)
    [ $# -eq 2 ] || usage
    apply_into "$2" rejects
    echo "instrumented copy in $2/reference; edit it, then: tools/mutant_patch.sh save $2" >&2
    ;;
  save)
    [ $# -eq 2 ] || usage
    dir=$2
    [ -d "$dir/reference" ] || die "$dir/reference: no such folder (run: tools/mutant_patch.sh edit $dir)"
    rej=$(cd "$dir" && find reference -name '*.rej' -o -name '*.orig')
    [ -z "$rej" ] || die "$dir still has $rej: fix those hunks by hand, then delete the files"
    new=$(mktemp)
    # One file at a time with fixed labels: no time stamps, the same bytes on every machine.
    (cd "$dir" && find reference -type f; cd "$src" && find reference -type f) | LC_ALL=C sort -u |
      while read -r f; do
        a="$src/$f" b="$dir/$f"
        [ -e "$a" ] || a=/dev/null
        [ -e "$b" ] || b=/dev/null
        diff -u --label "a/$f" --label "b/$f" "$a" "$b" || [ $? -eq 1 ]
      done >"$new"
    grep -q 'POSENC_MUTANT("' "$new" || die "the diff reference/ -> $dir/reference adds no mutant"
    mv "$new" "$patch_file"
    echo "wrote tools/mutants/reference.patch: $(grep -c '^+.*POSENC_MUTANT("' "$patch_file") mutant lines" >&2
    ;;
  check)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    apply_into "$tmp/copy"
    echo "tools/mutants/reference.patch applies to reference/" >&2
    ;;
  *) usage ;;
esac
