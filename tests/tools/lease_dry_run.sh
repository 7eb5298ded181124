#!/usr/bin/env bash
# tools/gpu/lease.sh without a GPU (DRY=1): every step of a lease runs, printing instead of
# running what needs the GPU; each printed tarnn, tools/*.py or cmake command must name a tool
# that exists here and only flags that tool accepts (its --help lists them), and the other
# commands must be the GPU machine's own tools. So a renamed flag or step fails in CI, not on a
# lent GPU.
#   lease_dry_run.sh TARNN SOURCE_DIR
set -u
TARNN=$1 SRC=$2
PY=${TARNN_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$SRC"
DRY=1 OUT="$work/out" LEASE_DIR="$work/lease" PY="$PY" bash tools/gpu/lease.sh build train-start test sanitize train-end \
  bench profile softmax pack >"$work/log" 2>&1 || bad "lease.sh exited $?: $(tail -5 "$work/log")"
grep -q "== .* done" "$work/log" || bad "lease.sh did not reach its end"
grep '^dry: ' "$work/log" | sed 's/^dry: //' >"$work/commands"
[ "$(wc -l <"$work/commands")" -gt 20 ] || bad "too few commands: $(wc -l <"$work/commands")"
# flags NAME HELP_CMD...: the --flags of the help's text
flags_of() { "$@" --help 2>&1 | grep -oE -- '--[a-z0-9][a-z0-9-]*' | sort -u; }
while read -r line; do
  set -- $line
  while [ $# -gt 0 ] && { [ "$1" = timeout ] || [ "$1" = env ] || [[ "$1" == [A-Z_]*=* ]] || [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" = /usr/bin/time ] || [ "$1" = -v ]; }; do shift; done
  tool=$1
  shift
  case $tool in
    build-gpu/tarnn)
      sub=$1
      known=$(flags_of "$TARNN" "$sub")
      for f in $(printf '%s\n' "$@" | grep -oE '^--[a-z0-9-]+'); do
        grep -qx -- "$f" <<<"$known" || bad "tarnn $sub has no $f: $line"
      done ;;
    "$PY" | python3)
      script=$1
      [ -f "$script" ] || { bad "no $script: $line"; continue; }
      known=$(flags_of "$PY" "$script")
      for f in $(printf '%s\n' "$@" | grep -oE '^--[a-z0-9-]+'); do
        grep -qx -- "$f" <<<"$known" || bad "$script has no $f: $line"
      done ;;
    cmake | ctest | split) command -v "$tool" >/dev/null || bad "no $tool here: $line" ;;
    nvidia-smi | compute-sanitizer | ncu) ;; # the GPU machine's
    build-gpu/tests/*) ;;                    # built there from test targets that exist here
    *) bad "an unexpected command: $line" ;;
  esac
done <"$work/commands"
# the timed steps refuse to run beside a trainer (a stand-in that lives until it is killed)
mkdir -p "$work/lease2"
sleep infinity &
trainer=$!
trap 'kill $trainer 2>/dev/null; rm -rf "$work"' EXIT
echo $trainer >"$work/lease2/train.pid"
DRY=1 OUT="$work/out2" LEASE_DIR="$work/lease2" bash tools/gpu/lease.sh bench >"$work/log2" 2>&1
grep -q "a trainer is running" "$work/log2" || bad "bench ran beside a trainer: $(tail -3 "$work/log2")"
kill $trainer 2>/dev/null
[ $fail -eq 0 ] && echo "lease dry run: ok ($(wc -l <"$work/commands") commands checked)"
exit $fail
