#!/usr/bin/env bash
# tarnn --device cuda end to end. With a GPU: it samples, scores and benchmarks. Without one (or
# without a CUDA build): each command is one line on stderr naming why, a non-zero exit, and no
# output file; those checks pass, then the script exits 77 and ctest reports it skipped.
# usage: cuda_cli_test.sh TARNN SOURCE_DIR
TARNN=$1
SRC=$2
source "$(dirname "$0")/cli_lib.sh"

"$TARNN" sample --device cuda --model "$SMALL" -n 4 --seed 3 -o "$work/g.png" >"$work/out" 2>"$work/err"
rc=$?
if [ $rc -eq 0 ]; then
  echo "a CUDA device is present: $(cat "$work/out")"
  [ -s "$work/g.png" ] && ok || bad "sample --device cuda wrote no PNG"
  "$TARNN" score --device cuda --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" >"$work/s" 2>&1 && ok || bad "score --device cuda: $(cat "$work/s")"
  "$TARNN" bench --device cuda --model "$SMALL" --batch 8 --steps 3 --json-file "$work/b.json" >"$work/b" 2>&1 && ok || bad "bench --device cuda: $(cat "$work/b")"
  grep -q images_per_second "$work/b.json" 2>/dev/null && ok || bad "bench --device cuda JSON"
else
  reason=$(cat "$work/err")
  echo "no CUDA run here: $reason"
  [ "$(wc -l <"$work/err")" -eq 1 ] && ok || bad "stderr is not one line: $reason"
  case "$reason" in
    *"no CUDA device"* | *"not available in this build"*) ok ;;
    *) bad "unexpected error: $reason" ;;
  esac
  [ -e "$work/g.png" ] && bad "a failed run left an output file" || ok
  for cmd in "score --images $SMALL/inputs-idx-ubyte" "bench --batch 4 --steps 2"; do
    # shellcheck disable=SC2086
    "$TARNN" $cmd --device cuda --model "$SMALL" >"$work/out" 2>"$work/err"
    [ $? -ne 0 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -qE "no CUDA device|not available in this build" "$work/err" && ok || bad "$cmd --device cuda: $(cat "$work/err")"
  done
fi
finish || exit 1
[ $rc -eq 0 ] || exit 77 # the GPU runs did not happen: skipped
