#!/usr/bin/env bash
# tools/gpu/lease.sh without a GPU (DRY=1): the three calls of a lease run on the estimates' clock,
# printing instead of running what needs the GPU; each printed tarnn, tools/*.py or cmake command
# must name a tool that exists here and only flags that tool accepts (its --help lists them), and
# the other commands must be the GPU machine's own tools. So a renamed flag or step fails in CI,
# not on a lent GPU. The bench covers every configuration at 4,096 images and at the automatic
# batch, from lists that must be tarnn's own (precisions, state formats) and the reference's
# (feature maps); the timed steps refuse to run beside a trainer.
#   lease_dry_run.sh TARNN SOURCE_DIR
TARNN=$1 SRC=$2
source "$SRC/tests/cli/cli_lib.sh" # PY, the scratch folder $work, bad and the count of failures
cd "$SRC" || exit 1
for c in 1 2 3; do
  DRY=1 OUT="$work/out$c" LEASE_DIR="$work/lease" PY="$PY" bash tools/gpu/lease.sh call $c >"$work/log$c" 2>&1 ||
    bad "call $c exited $?: $(tail -5 "$work/log$c")"
  grep -q "== .* done" "$work/log$c" || bad "call $c did not reach its end"
  grep -E "skipped|no room" "$work/log$c"
done
cat "$work"/log? | grep '^dry: ' | sed 's/^dry: //' >"$work/commands"
[ "$(wc -l <"$work/commands")" -gt 20 ] || bad "too few commands: $(wc -l <"$work/commands")"
# flags_of HELP_CMD...: the --flags of the help's text (asked once per tool: a torch start-up each)
declare -A helps
flags_of() {
  [ -n "${helps[$*]:-}" ] || helps[$*]=$("$@" --help 2>&1 | grep -oE -- '--[a-z0-9][a-z0-9-]*' | sort -u)
  echo "${helps[$*]}"
}
while read -r line; do
  set -- $line
  while [ $# -gt 0 ] && { [ "$1" = timeout ] || [ "$1" = env ] || [[ "$1" == [A-Z_]*=* ]] || [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" = /usr/bin/time ] || [ "$1" = -v ]; }; do shift; done
  tool=$1
  shift
  case $tool in
    build-gpu/tarnn)
      sub=$1
      [ -n "${helps[$TARNN $sub]:-}" ] || flags_of "$TARNN" "$sub" >/dev/null
      known=${helps[$TARNN $sub]}
      for f in $(printf '%s\n' "$@" | grep -oE '^--[a-z0-9-]+'); do
        grep -qx -- "$f" <<<"$known" || bad "tarnn $sub has no $f: $line"
      done ;;
    "$PY" | python3)
      script=$1
      [ -f "$script" ] || { bad "no $script: $line"; continue; }
      [ -n "${helps[$PY $script]:-}" ] || flags_of "$PY" "$script" >/dev/null
      known=${helps[$PY $script]}
      for f in $(printf '%s\n' "$@" | grep -oE '^--[a-z0-9-]+'); do
        grep -qx -- "$f" <<<"$known" || bad "$script has no $f: $line"
      done ;;
    cmake | ctest) command -v "$tool" >/dev/null || bad "no $tool here: $line" ;;
    nvidia-smi | compute-sanitizer | ncu) ;; # the GPU machine's
    build-gpu/tests/*) ;;                    # built there from test targets that exist here
    *) bad "an unexpected command: $line" ;;
  esac
done <"$work/commands"

# every configuration: each precision x state format x feature map, at 4,096 images over every
# position and at the automatic batch over 100
lists=$(sed -n -E 's/^(PRECISIONS|STATES|MAPS)="(.*)"$/\1 \2/p' tools/gpu/lease.sh)
mine() { awk -v k="$1" '$1 == k { $1 = ""; print }' <<<"$lists" | tr ' ' '\n' | grep . | sort | tr '\n' ' '; }
theirs_of() { # tarnn's own list, from its answer to a value it does not know
  "$TARNN" bench --steps 1 "--$1" none 2>&1 | sed -E 's/.*: not an? [a-z ]+ \(([^)]*)\).*/\1/; s/,| or | on cuda/ /g' |
    tr ' ' '\n' | grep . | sort | tr '\n' ' '
}
[ "$(mine PRECISIONS)" = "$(theirs_of precision)" ] || bad "lease.sh's precisions '$(mine PRECISIONS)' are not tarnn's '$(theirs_of precision)'"
[ "$(mine STATES)" = "$(theirs_of state)" ] || bad "lease.sh's state formats '$(mine STATES)' are not tarnn's '$(theirs_of state)'"
maps=$(cd tools && $PY -c 'import tarnn_model; print("\n".join(tarnn_model.FEATURE_MAPS))' | sort | tr '\n' ' ')
[ "$(mine MAPS)" = "$maps" ] || bad "lease.sh's feature maps '$(mine MAPS)' are not tarnn_model.py's '$maps'"
configs=$(($(mine PRECISIONS | wc -w) * $(mine STATES | wc -w) * $(mine MAPS | wc -w)))
for batch in "--batch 4096 --precision" "--batch 0 --steps 100 --precision"; do
  n=$(grep -E "tarnn bench --device cuda (--shape mnist|--model [^ ]*/maps/[a-z_]+) $batch" "$work/commands" |
    sed -E 's/^.*(tarnn bench)/\1/' | sort -u | wc -l)
  [ "$n" -eq "$configs" ] || bad "$n bench runs with '$batch', not the $configs configurations"
done
echo "bench: $configs configurations, each at 4,096 and at the automatic batch"
# the A/B path (BENCH_PATHS): bf16 with elu+1 again with its inputs rounded as before, each state
ab=$(grep -cE "TARNN_BF16_INPUTS=rounded [^ ]*tarnn bench --device cuda --shape mnist --batch [^-]*(--steps 100 )?--precision bf16 " "$work/commands")
[ "$ab" -eq $((2 * $(mine STATES | wc -w))) ] || bad "$ab runs of bf16 with TARNN_BF16_INPUTS=rounded"
[ "$(grep -c "TARNN_BF16_INPUTS" "$work/commands")" -eq "$ab" ] || bad "TARNN_BF16_INPUTS beyond bf16 with elu+1"
ln=$(grep -cE "TARNN_LAYERNORM=passes [^ ]*tarnn bench --device cuda --shape mnist --batch [^-]*(--steps 100 )?--precision bf16 " "$work/commands")
[ "$ln" -eq $((2 * $(mine STATES | wc -w))) ] || bad "$ln runs of bf16 with TARNN_LAYERNORM=passes"
[ "$(grep -c "TARNN_LAYERNORM" "$work/commands")" -eq "$ln" ] || bad "TARNN_LAYERNORM beyond bf16 with elu+1"
bo=$(grep -cE "TARNN_BF16_OUTPUTS=fp32 [^ ]*tarnn bench --device cuda --shape mnist --batch [^-]*(--steps 100 )?--precision bf16 " "$work/commands")
[ "$bo" -eq $((2 * $(mine STATES | wc -w))) ] || bad "$bo runs of bf16 with TARNN_BF16_OUTPUTS=fp32"
[ "$(grep -c "TARNN_BF16_OUTPUTS" "$work/commands")" -eq "$bo" ] || bad "TARNN_BF16_OUTPUTS beyond bf16 with elu+1"
ff=$(grep -cE "TARNN_STATE_CHUNK=6 TARNN_FEED_FORWARD=fused [^ ]*tarnn bench --device cuda --shape mnist --batch [^-]*(--steps 100 )?--precision bf16 --state fp16 " "$work/commands")
[ "$ff" -eq 2 ] || bad "$ff runs of bf16 with the fp16 state, TARNN_STATE_CHUNK=6 and TARNN_FEED_FORWARD=fused"
lay=$(grep -cE "TARNN_STATE_CHUNK=6 TARNN_FEED_FORWARD=layer [^ ]*tarnn bench --device cuda --shape mnist --batch [^-]*(--steps 100 )?--precision bf16 --state fp16 " "$work/commands")
[ "$lay" -eq 2 ] || bad "$lay runs of bf16 with the fp16 state, TARNN_STATE_CHUNK=6 and TARNN_FEED_FORWARD=layer"
[ "$(grep -c "TARNN_FEED_FORWARD" "$work/commands")" -eq $((ff + lay)) ] || bad "TARNN_FEED_FORWARD beyond bf16 with elu+1 and the fp16 state"

# the timed steps refuse to run beside a trainer (a stand-in that lives until it is killed)
mkdir -p "$work/lease2"
sleep infinity &
trainer=$!
trap 'kill $trainer 2>/dev/null; rm -rf "$work"' EXIT
echo $trainer >"$work/lease2/train.pid"
DRY=1 OUT="$work/out4" LEASE_DIR="$work/lease2" PY="$PY" bash tools/gpu/lease.sh bench profile softmax >"$work/log4" 2>&1
grep -q "a trainer is running" "$work/log4" || bad "bench ran beside a trainer: $(tail -3 "$work/log4")"
grep -q "skipped: profile: a trainer is running" "$work/log4" || bad "profile ran beside a trainer"
grep -q "^dry: .*bench --device cuda" "$work/log4" && bad "a timed command beside a trainer"
kill $trainer 2>/dev/null

# train-start for real, with a stand-in trainer (PY) that lists its descriptors, writes its rate
# and then blocks on a FIFO until released: lease.sh's output (a pipe, as the device tool's is)
# must reach its end while the trainer still runs. A descriptor of the call's output held by the
# trainer kept call 1 of the lease of 2026-11-25 waiting for its 600-s limit after its steps ended.
mkfifo "$work/fds" "$work/release"
cat >"$work/trainer" <<'EOF'
#!/usr/bin/python3
import json, os, sys
fds = sorted(os.listdir("/proc/self/fd"), key=int)
held = [f"{fd} -> {os.readlink('/proc/self/fd/' + fd)}" for fd in fds
        if os.path.exists("/proc/self/fd/" + fd)]
with open(sys.argv[sys.argv.index("--rate-file") + 1], "w") as f:
    json.dump({"images_per_second": 1.0}, f)
with open(os.environ["STAND_IN_FDS"], "w") as f:
    f.write("\n".join(held) + "\n")
open(os.environ["STAND_IN_RELEASE"]).read()  # until the test lets it go
EOF
chmod +x "$work/trainer"
STAND_IN_FDS="$work/fds" STAND_IN_RELEASE="$work/release" OUT="$work/out5" \
  LEASE_DIR="$work/lease3" PY="$work/trainer" bash tools/gpu/lease.sh train-start 2>&1 |
  cat >"$work/log5" &
reader=$!
held=$(cat "$work/fds") # the trainer is up: it has written its rate file and blocks
if grep -E "pipe:" <<<"$held"; then
  bad "the trainer holds a pipe (the call's output?): $(tr '\n' ' ' <<<"$held")"
  echo >"$work/release" # let it go, so the call's output ends and the test with it
  wait $reader
else
  wait $reader # the end of lease.sh's output, with the trainer still blocked on the FIFO
  kill -0 "$(cat "$work/lease3/train.pid")" 2>/dev/null ||
    bad "the stand-in trainer is not running after train-start (pid $(cat "$work/lease3/train.pid"))"
  grep -q "training from models/mnist until" "$work/log5" || bad "train-start: $(tail -3 "$work/log5")"
  echo >"$work/release"
  echo "train-start: lease.sh's output ended with the trainer still running; it holds: $(grep -c . <<<"$held") descriptors, no pipe"
fi

# the build step for real, with stand-ins for cmake and nvidia-smi: a target that fails (the test
# shim, as on 2026-11-25) must not cost the lease tarnn and the GPU tests' programs. The stand-in
# builds as ninja does: it stops at the failure unless told to go on (-k 0).
mkdir -p "$work/bin"
cat >"$work/bin/cmake" <<'EOF'
#!/usr/bin/env bash
if [ "$1" != --build ]; then # configure: a build folder with one gpu-labelled test program
  while [ "$1" != -B ]; do shift; done
  mkdir -p "$2/tests" && touch "$2/build.ninja"
  printf 'add_test(test_kernels_cuda "%s/tests/test_kernels")\nset_tests_properties(test_kernels_cuda PROPERTIES LABELS "gpu" ENVIRONMENT "TARNN_KERNELS=cuda")\n' \
    "$(cd "$2" && pwd)" >"$2/CTestTestfile.cmake"
  exit 0
fi
echo "FAILED: tests/CMakeFiles/fault_inject.dir/cli/fault_inject.c.o"
echo "fault_inject.c:19: error: inlining failed (a stand-in)"
if [[ " $* " == *" -k 0 "* ]]; then
  for p in tarnn tests/test_kernels; do printf '#!/bin/sh\n' >"$2/$p" && chmod +x "$2/$p"; done
fi
echo "ninja: build stopped: subcommand failed."
exit 1
EOF
printf '#!/bin/sh\necho "a stand-in GPU"\n' >"$work/bin/nvidia-smi"
chmod +x "$work/bin/cmake" "$work/bin/nvidia-smi"
stand_in() { # LOG STEPS...: lease.sh's STEPS with the stand-ins, into $work/LOG
  local log=$1
  shift
  PATH="$work/bin:$PATH" OUT="$work/out6" LEASE_DIR="$work/lease6" LEASE_BUILD="$work/b6" \
    PY="$PY" bash tools/gpu/lease.sh "$@" >"$work/$log" 2>&1 || bad "$* exited $?"
}
stand_in log6 build
grep -q "build: failed for tests/CMakeFiles/fault_inject.dir/cli/fault_inject.c.o; every program the GPU steps need is built" "$work/log6" &&
  [ -x "$work/b6/tarnn" ] || bad "one failed target cost the build: $(grep '^==' "$work/log6" | tail -3)"
# a build that stopped short (call 1's): the next step that needs it builds again, once
rm "$work/b6/tarnn"
stand_in log7 sanitize
grep -q "no $work/b6/tarnn: building again" "$work/log7" && [ -x "$work/b6/tarnn" ] &&
  ! grep -q "skipped: no .*tarnn" "$work/log7" ||
  bad "no build again before the steps that need it: $(grep '^==' "$work/log7" | tail -3)"
grep -E "^== .*build" "$work/log6" "$work/log7" | sed 's/^[^:]*://'
[ $fail -eq 0 ] && echo "lease dry run: ok ($(wc -l <"$work/commands") commands checked)"
[ $fail -eq 0 ]
