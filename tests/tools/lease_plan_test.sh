#!/usr/bin/env bash
# tools/gpu/lease.sh plan: a lease of three calls of at most 9 minutes whose files back and tree
# out keep to the device tool's limits (checked here from the lines it prints, not from its exit
# alone); and it exits 1, saying why, when an estimate makes a call too long, when what comes back
# breaks a limit (the size of a file, the count) and when what travels passes its limit. At run
# time (DRY=1, on the estimates' clock) a step the call has no room for is skipped, said so.
# usage: lease_plan_test.sh SOURCE_DIR
SRC=$1 TARNN=unused
source "$SRC/tests/cli/cli_lib.sh" # the scratch folder $work, bad and the count of failures
cd "$SRC" || exit 1
bash tools/gpu/lease.sh plan >"$work/plan" 2>"$work/err"
rc=$?
sed '/^estimates/q' "$work/plan" # the estimates and their sources follow in the plan's output
[ $rc -eq 0 ] || bad "plan exited $rc"
[ -s "$work/err" ] && bad "plan wrote to stderr: $(head -3 "$work/err")"
[ "$(grep -c '^call [0-9]: ' "$work/plan")" -eq 3 ] || bad "not three calls"
awk '/^call [0-9]: / { if ($3 + 0 > 9.0 || $4 != "min") { print "FAIL: " $0; f = 1 } } END { exit f }' \
  "$work/plan" || fail=1
# what comes back, call by call: at most 8 files, each at most 16 MiB, 64 MiB together
awk '/^call / { c = $2 } /^back: / { n[c]++; s[c] += $3; if ($4 != "MiB" || $3 + 0 > 16) { print "FAIL: " $0; f = 1 } }
  END { for (k in n) if (n[k] > 8 || s[k] > 64) { print "FAIL: call " k ": " n[k] " files, " s[k] " MiB"; f = 1 }
        exit f }' "$work/plan" || fail=1
grep -q '^back: weights.part-00 ' "$work/plan" || bad "the trained weights do not come back"
awk '/^travels: / { if ($2 + 0 > 64) { print "FAIL: " $0; f = 1 } } END { exit f }' "$work/plan" || fail=1
grep -q '^training: .*decay' "$work/plan" || bad "no training line"
# every estimate has a source
awk '/^estimates/ { on = 1; next } on && /^  [a-z-]+ [0-9]+/ && NF < 3 { print "FAIL: no source: " $0; f = 1 }
  END { exit f }' "$work/plan" || fail=1

refused() { # WHAT WANT ENV...: plan with ENV exits 1 saying WANT
  local what=$1 want=$2
  shift 2
  env "$@" bash tools/gpu/lease.sh plan >"$work/out" 2>&1
  local r=$?
  [ $r -eq 1 ] || bad "$what: plan exited $r, not 1"
  grep -qE -- "$want" "$work/out" || bad "$what: no '$want' in: $(grep -vE '^  ' "$work/out" | tail -3)"
}
refused "a call over 9 minutes" "^  over 9 minutes" LEASE_EST_test=400
refused "a file back over its limit" "^  tests.log: over 1.0 MiB" LEASE_BACK_FILE_BYTES=$((1 << 20))
refused "too many files back" "^  back: [0-9]+ files, .*: over 5 files" LEASE_BACK_FILES=5
refused "what travels over its limit" "^  travels: over 40.0 MiB" LEASE_TRAVEL_BYTES=$((40 << 20))
# as the size allows: files of at most 8 MiB take the weights in BF16 (2 parts), and the plan holds
LEASE_BACK_FILE_BYTES=$((8 << 20)) bash tools/gpu/lease.sh plan >"$work/out" 2>&1 || bad "8 MiB files: exited $?"
grep -q "weights back as BF16" "$work/out" && grep -q "^back: weights.part-01 " "$work/out" &&
  ! grep -q "^back: weights.part-02 " "$work/out" || bad "8 MiB files: not BF16 in 2 parts: $(grep -E 'weights' "$work/out")"

# at run time: no room, the step is skipped and said to be; the next that fits runs
DRY=1 OUT="$work/o" LEASE_DIR="$work/l" LEASE_EST_test=400 bash tools/gpu/lease.sh call 1 >"$work/run" 2>&1 ||
  bad "call 1 exited $?"
est() { awk -v s="$1" '/^estimates/ { on = 1 } on && $1 == s { print $2; exit }' "$work/plan"; }
at=$(($(est build) + $(est train-start)))
grep -q "skipped: test: its estimate is 400 s, and $((540 - at)) s are left of this call's 540" "$work/run" ||
  bad "test not skipped: $(grep -E '^==' "$work/run")"
grep -q "== \[$at s\] maps (estimate $(est maps) s" "$work/run" || bad "maps did not run after it"
# what the plan leaves goes to the trainer alone (train-wait), in calls 1 and 2, and its minutes
grep -qE "^call 1: .* train-wait\([1-9][0-9]* s\)$" "$work/plan" &&
  grep -qE "^call 2: .*  sanitize train-wait\([1-9][0-9]* s\) train-end bench" "$work/plan" ||
  bad "no train-wait in calls 1 and 2: $(grep '^call' "$work/plan")"
[ $fail -eq 0 ] && echo "lease plan: ok"
[ $fail -eq 0 ]
