# Shared by the end-to-end scripts: a scratch folder, counters and the checks they count.
# Source it after setting TARNN and SRC; it defines SMALL, MNIST, PY and work.
# need_mnist: for scripts that use the MNIST-size golden model.
set -u
SMALL=$SRC/tests/golden/small
MNIST=${TARNN_GOLDEN_MNIST:-} # made by ctest's fixture; scripts that use it say so
PY=${TARNN_PYTHON:-/usr/bin/python3} # ctest sets it to the configured TARNN_TORCH_PYTHON
# No timed progress lines (a log gets one every 10 s): a slow or busy machine would add them to
# the stderr that expect_error wants as one line. A check of progress sets its own interval.
export TARNN_PROGRESS_SECONDS=86400
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
  echo "FAIL: $*"
  fail=$((fail + 1))
}
# read_fifo FIFO OUT / write_fifo FIFO IN, then release_fifo FIFO: a cat that reads FIFO into OUT
# (or writes IN into it) beside a command, and ends however far it and the command got, with no
# timeout. The test holds FIFO open for reading and writing (which never blocks), so it is the
# other end the cat's side needs: its end is opened here, before the cat starts, and does not wait.
# release_fifo, once the command has exited, closes the held end: the reader then reads end of
# file, the writer gets a broken pipe; then `wait`.
declare -A held_fifos
read_fifo() {
  local r
  hold_fifo "$1"
  exec {r}<"$1"
  (
    close_held # a reader holding a write end would never see end of file
    exec cat <&"$r" # stdin named: a background job's would be /dev/null
  ) >"$2" &
  exec {r}<&-
}
write_fifo() {
  local w
  hold_fifo "$1"
  exec {w}>"$1"
  (
    close_held
    exec cat "$2" 2>/dev/null
  ) >&"$w" &
  exec {w}>&-
}
hold_fifo() {
  local fd
  exec {fd}<>"$1"
  held_fifos[$1]=$fd
}
close_held() { for fd in "${held_fifos[@]}"; do eval "exec $fd>&-"; done; }
release_fifo() {
  eval "exec ${held_fifos[$1]}>&-"
  unset "held_fifos[$1]"
}
expect_error() { # SUBSTRING CMD...: non-zero exit, one line on stderr holding SUBSTRING
  local want=$1
  shift
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -eq 0 ]; then bad "$* exited 0"; return; fi
  if [ "$(wc -l <"$work/err")" -ne 1 ]; then bad "$*: stderr is not one line: $(cat "$work/err")"; return; fi
  if ! grep -qF -- "$want" "$work/err"; then bad "$*: stderr lacks '$want': $(cat "$work/err")"; return; fi
  ok
}
expect_usage() { # SUBSTRING CMD...: exit 2, one line "tarnn: usage error: ...SUBSTRING... (see ...)"
  local want=$1
  shift
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -ne 2 ]; then bad "$*: exit $rc, not 2: $(cat "$work/err")"; return; fi
  if [ "$(wc -l <"$work/err")" -ne 1 ]; then bad "$*: stderr is not one line: $(cat "$work/err")"; return; fi
  if ! grep -q "^tarnn: usage error: .*(see tarnn .*--help)$" "$work/err"; then bad "$*: not the usage error's form: $(cat "$work/err")"; return; fi
  if ! grep -qF -- "$want" "$work/err"; then bad "$*: stderr lacks '$want': $(cat "$work/err")"; return; fi
  ok
}
expect_ok() { if "$@" >"$work/out" 2>"$work/err"; then ok; else bad "$* failed: $(cat "$work/err")"; fi; }
expect_eq() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', want '$2'"; fi; }
png_size() { # WIDTHxHEIGHT from the IHDR chunk
  od -An -tu1 -j16 -N8 "$1" | awk '{print $1*16777216+$2*65536+$3*256+$4 "x" $5*16777216+$6*65536+$7*256+$8}'
}
finish() {
  echo "$pass passed, $fail failed"
  [ $fail -eq 0 ]
}
need_mnist() { : "${MNIST:?run through ctest, whose fixture makes the MNIST-size model}"; }
