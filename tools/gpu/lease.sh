#!/usr/bin/env bash
# A lent GPU (an H100, or an H200 when no H100 is free) for about 30 minutes, held to the lease's
# limits (the device tool's README): commands of at most 10 minutes; the machine given back 30 s
# after a call ends; $OUT emptied before each call and at most 8 files of 16 MiB, 64 MiB in all,
# back from it; at most 64 MiB of tree and carried files to it. docs/CUDA.md "On a lent GPU" is
# the runbook.
#
# Here, without a GPU:
#   tools/gpu/lease.sh plan             one line per call, `call N: M.M min  STEPS`, and what each
#                                       call brings back (`back: FILE SIZE`); what travels; the
#                                       training's minutes; the estimates, each with its source.
#                                       Exits 1 when a call passes 9 minutes, when what comes back
#                                       breaks its limits or when what travels passes 64 MiB.
#   tools/gpu/lease.sh prepare [MODEL]  .gpu/, which each call carries: Debian's headers for the
#                                       build (deps/), data/mnist as mnist.tgz, and MODEL (the
#                                       last lease's joined weights) as init/, in F32 where what
#                                       travels allows it, else BF16
#   tools/gpu/lease.sh join DIR MODEL   the weights a call brought back (its files in DIR) joined
#                                       into the model folder MODEL, bit for bit, and scored here
#                                       against the device's own score (tools/gpu/weights.py)
# There, each call one `run` of the device tool (carry [".gpu"], timeout_s 600), back to back:
#   tools/gpu/lease.sh call 1           build; the trainer (measured alone 60 s); the GPU suite;
#                                       the trainer alone for what the call has left
#   tools/gpu/lease.sh call 2           sanitizers; the trainer alone for what the plan leaves; its
#                                       end and its weights, back; bench
#   tools/gpu/lease.sh call 3           the rest of the bench; ncu; the paper's softmax on the GPU
#   tools/gpu/lease.sh STEP...          steps by name:
#     build        nvidia-smi; data/mnist from .gpu/mnist.tgz; build-gpu/ (Release, sm_90 on an H100
#                  and an H200 alike, the carried deps): everything, so that every test labelled
#                  gpu is built, whoever adds it; on past a target that fails (ninja -k 0), then
#                  tarnn and the gpu-labelled test programs checked. A later step that needs the
#                  build and finds none builds again, once a call
#     train-start  tools/train.py from .gpu/init (else models/mnist) with a fresh optimizer, in its
#                  own session (setsid: it outlives the call; no descriptor of the call's output
#                  kept, so the call returns when its steps end), to a deadline the plan sets: its
#                  rate's decay ends before train-end. Its images/s is measured alone for 60 s
#                  (after torch.compile, which falls back to eager mode after 2 minutes or a
#                  failure) before anything else starts: $OUT/train-rate.json
#     train-wait   the trainer alone on the GPU for what the plan leaves: to the end of call 1,
#                  and in call 2 as long as the rest of calls 2 and 3 still fits after it
#     test         ctest -L gpu, once (every test labelled gpu: the kernels, the backend, the CLI)
#     maps         MNIST-size random models of each other feature map, for the bench
#     sanitize     compute-sanitizer, at most 60 s a tool: memcheck over every gpu-labelled test
#                  program but test_cuda's full-size rollouts; racecheck over the attention
#                  kernels' cases of test_kernels
#     train-end    the trainer's end (on its own, at its deadline; else SIGTERM: it checkpoints);
#                  the weights its log says to keep (the last or the averaged, the better on the
#                  held-out digits) exported (F32, or BF16 when F32 would not fit what comes
#                  back), in parts with a manifest into $OUT at once, then scored on the GPU
#     bench        every configuration (precision x state format x feature map) at 4,096 images
#                  over all 783 positions and at the automatic batch over 100; sample and score
#                  timed. Nothing else on the GPU (refused while a trainer runs); what a call has
#                  no room for is left to the next call, said so
#     profile      ncu over one step of each precision and state format at 4,096 images
#     softmax      the paper's softmax baseline against linear attention in PyTorch on the GPU
# Every step writes its log and results into $OUT as it goes (a call killed at its limit still
# brings back what it did); each step runs only when its estimate fits what is left of the call's
# 9 minutes, and says so when it does not. DRY=1 runs the steps here on a clock of estimates,
# printing what needs a GPU instead of running it (tests/tools/lease_dry_run.sh, in CI).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
MiB=1048576

# ---- the lease's limits (the device tool's README) ------------------------------------------
CALL_S=${LEASE_CALL_SECONDS:-540}         # a call's plan: 9 of the 10 minutes a command may run
BACK_FILES=${LEASE_BACK_FILES:-8}         # files back from one call,
BACK_FILE_B=${LEASE_BACK_FILE_BYTES:-$((16 * MiB))} # each at most,
BACK_TOTAL_B=${LEASE_BACK_TOTAL_BYTES:-$((64 * MiB))} # and together
TRAVEL_B=${LEASE_TRAVEL_BYTES:-$((64 * MiB))} # the tree and the carried paths, to the machine
PART_B=$((BACK_FILE_B < 15 * MiB ? BACK_FILE_B : 15 * MiB)) # the weights' parts: under 16 MiB
CALLS=("build train-start test maps train-wait" "sanitize train-wait train-end bench"
  "bench profile softmax")
WAIT_MARGIN=30 # a call's seconds that train-wait leaves to the steps' estimates being short
# What exists, one list each (lease_dry_run checks them against tarnn's and tarnn_model.py's own)
PRECISIONS="fp32 tf32 bf16 int8"
STATES="fp32 fp16"
MAPS="elu+1 relu random_fourier smoothed_random_fourier favor generalized_random"
# A new path beside the one it replaces (A/B in one call): an environment setting per entry, each
# configuration run once per entry, one after another. "" is the code as it is. PATTERN:SETTING
# runs only the configurations whose PRECISION-MAP (any state) or PRECISION-MAP-STATE the (shell)
# pattern matches.
# TARNN_BF16_INPUTS=rounded: bf16 GEMMs' inputs rounded by passes of their own, as before issue 41;
# TARNN_LAYERNORM=passes: each LayerNorm a pass of its own, the row read twice, as before issue 41's
# point c; TARNN_STATE_CHUNK=6: the state's write deferred over chunks of 6 positions, the chunk's
# buffer in the state's 16 bits (issue 41, point 3), beside the state written every position;
# TARNN_BF16_OUTPUTS=fp32: q, k and v written in fp32 by their bf16 GEMM, as before issue 41's bf16
# outputs; TARNN_FEED_FORWARD=fused (with TARNN_STATE_CHUNK=6): the feed-forward block and its
# LayerNorm in one kernel; TARNN_FEED_FORWARD=layer: all after the attention (the out-projection,
# both LayerNorms, the feed-forward) in one (docs/CUDA.md, "The byte budget of a step"). Settings
# of one entry are comma-separated.
BENCH_PATHS=("" "bf16-elu+1:TARNN_BF16_INPUTS=rounded" "bf16-elu+1:TARNN_LAYERNORM=passes"
  "bf16-elu+1-fp16:TARNN_STATE_CHUNK=6" "bf16-elu+1:TARNN_BF16_OUTPUTS=fp32"
  "bf16-elu+1-fp16:TARNN_STATE_CHUNK=6,TARNN_FEED_FORWARD=fused"
  "bf16-elu+1-fp16:TARNN_STATE_CHUNK=6,TARNN_FEED_FORWARD=layer")
NCU_METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
NCU_METRICS+=,sm__throughput.avg.pct_of_peak_sustained_elapsed
NCU_METRICS+=,dram__throughput.avg.pct_of_peak_sustained_elapsed
NCU_METRICS+=,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
# The trainer's: continuing a trained model with a fresh AdamW (docs/CUDA.md, "On a lent GPU":
# why 1.5e-4 at batch 512, unscaled, and 500 warm-up steps)
TRAIN_ARGS=${TRAIN_ARGS:---batch 512 --lr 1.5e-4 --warmup 500 --chunk 128 --compile}

OUT=${OUT:-/tmp/tarnn-lease}
L=${LEASE_DIR:-/tmp/lease} # kept between the calls of one lease (the machine stays up)
B=${LEASE_BUILD:-build-gpu}
T=${LEASE_TARNN:-$B/tarnn}
PY=${PY:-python3}
TEST_IMAGES=${LEASE_IMAGES:-data/mnist/test-images-idx3-ubyte}
DRY=${DRY:-}
PLAN=          # set while the plan runs the steps on its clock
CLOCK=0        # seconds into the call, on the plan's clock (plan and DRY=1)
CALL=steps

# ---- estimates ----------------------------------------------------------------------------
# STEP SECONDS SOURCE (indented lines go on with the source): what the plan adds up, and what a
# step is given at run time. LEASE_EST_STEP (with _ for -) overrides one (how the plan's test
# makes a call too long).
estimates() {
  cat <<'EOF'
build 60 the lease of 2026-11-25 (16 cores): configure and a build stopped by a test shim's
    error, 29 s (call 1); the rest, from the 5th of 97 steps, ~26 s by hand before call 2 (371 s
    of wall, 344 of them lease.sh's)
train-start 130 the lease of 2026-11-25: 119 s (call 1, [30 s] to [149 s]): the trainer's start,
    torch.compile's first 3 steps in 42.5 s (its watchdog allows 120: train.py
    --compile-timeout), 60 s measured alone (--rate-seconds)
test 120 the lease of 2026-11-25, by hand (call 3: the build had failed in call 1): ctest -L gpu
    33.6 s with -j4, its four programs 52 s one after another (all four failed: the bf16 bias);
    beside the trainer, and the checkpoint guard's six torch start-ups (35 s here)
maps 30 the lease of 2026-11-25: 28 s (call 1, [149 s] to [177 s]) for the 5 models
sanitize 70 the lease of 2026-11-25: 66 s (call 2, [1 s] to [67 s]): memcheck over the kernel tests
    4 s, over test_cuda_paths stopped at its 60 s; racecheck 6 s
train-end 30 the lease of 2026-11-25: ~19 s (call 2 from [67 s] to the bench's first record,
    16:22:02, less its 3 s; the call began at 16:20:33, 344 s before its last record): the trainer
    had stopped; export, parts, the engine's and PyTorch's scores of the 10,000 test digits
profile 25 the lease of 2026-11-25: 8 configurations in 105 s (call 3, [1 s] to [106 s]): 13-14 s
    each in fp32 and tf32, 24 s in int8 (125 kernels a step), 2 s each in bf16 (failed)
softmax 15 the lease of 2026-11-25: 3 batches in 41 s (call 3): 9, 11 and 21 s at 256, 1,024 and
    4,096 images
gap 45 from a call's end to the next one's start: the machine waits 30 s (the device README), so
    the next call comes within them, and the tree's transfer (15 s, estimate)
EOF
}

est() { # STEP: its estimate in seconds
  local var="LEASE_EST_${1//-/_}"
  if [ -n "${!var:-}" ]; then echo "${!var}"; return; fi
  estimates | awk -v s="$1" '/^[^ ]/ && $1 == s { print $2; f = 1 } END { if (!f) print 0 }'
}

GAP_S=$(est gap) # the trainer's clock runs on between the calls

# Images/s on the H100, the lease of 2026-11-25 (tools/bench/runs/h100-2026-11-25/bench.jsonl):
# each precision's slowest feature map and state (a random-feature map, about half of elu+1's),
# at 4,096 images over 783 positions and at the automatic batch (65,536) over 100. bf16: tf32's
# (its GEMMs failed there; the path before issue 41 ran at 3,574-5,520). A run's start and end:
# 1 s (107 runs took about 258 s of call 2, 182 of them the measured steps and 12 the sample and
# score runs). An H200 has an H100's arithmetic and 1.4 times its memory bandwidth: these hold as
# bounds.
run_estimate() { # PRECISION BATCH(4096|auto): seconds of one bench run
  local r4096 rauto
  case $1 in
    fp32) r4096=1607 rauto=1833 ;;
    tf32 | bf16) r4096=2373 rauto=2730 ;;
    int8) r4096=2185 rauto=2350 ;;
    *) echo "lease.sh: no measured rate for precision $1: fp32's" >&2; r4096=1607 rauto=1833 ;;
  esac
  if [ "$2" = auto ]; then
    awk -v r=$rauto 'BEGIN { printf "%d\n", 1 + 65536 * 100 / 783 / r + 0.999 }'
  else
    awk -v r=$r4096 -v b="$2" 'BEGIN { printf "%d\n", 1 + b / r + 0.999 }'
  fi
}

# ---- the divisible steps' items: ID SECONDS WHAT... --------------------------------------------
items_bench() {
  local map p s b path
  for map in $MAPS; do
    [ "$map" = relu ] && items_bench_extras # the timed commands, after elu+1's configurations
    for p in $PRECISIONS; do
      for s in $STATES; do
        for b in 4096 auto; do
          for path in "${BENCH_PATHS[@]}"; do
            case $path in *:*) # shellcheck disable=SC2254
              case "$p-$map-$s" in
                ${path%%:*} | ${path%%:*}-*) path=${path#*:} ;;
                *) continue ;;
              esac ;;
            esac
            echo "b$b-$p-$s-$map${path:+-${path//[^A-Za-z0-9]/_}} $(run_estimate $p $b) bench" \
              "$map $p $s $b $path"
          done
        done
      done
    done
  done
}
items_bench_extras() {
  echo "sample-fp32 8 sample fp32 fp32"         # 5.8 s wall (2026-11-25)
  echo "sample-bf16-fp16 8 sample bf16 fp16"
  echo "score-fp32 10 score fp32 fp32"          # 10,000 digits, one batch: 5.0 s (2026-11-25)
  echo "score-bf16-fp16 10 score bf16 fp16"
  echo "score-int8-fp16 10 score int8 fp16"     # cuBLASLt's int8 GEMMs: 2.3 s (2026-11-25)
  echo "complete 8 complete bf16 fp16"          # estimate: 10 images, 4 completions each
  echo "cifar10 4 cifar10 bf16 fp16"            # 300 of 3,071 positions at 4,096: 1 s at 419/s
}
items_profile() {
  local p s
  for p in $PRECISIONS; do for s in $STATES; do echo "ncu-$p-$s $(est profile) $p $s"; done; done
}
items_softmax() { local b; for b in 256 1024 4096; do echo "softmax-$b $(est softmax) $b"; done; }
divisible() { case $1 in bench | profile | softmax) return 0 ;; esac; return 1; }

# ---- what comes back: FILE BYTES (upper bounds; the weights' exact) ---------------------------
back_of() { # STEP
  case $1 in
    train-start) echo "train-rate.json 1024"; echo "train.log $((MiB / 4))" ;;
    test) echo "tests.log $((2 * MiB))" ;;
    sanitize) echo "sanitize.log $MiB" ;;
    train-end) echo "train.log $((MiB / 4))"; echo "weights.json $((MiB / 2))"; weight_parts ;;
    bench) echo "bench-$CALL.jsonl $MiB" ;;
    profile) echo "ncu.tgz $MiB" ;;
    softmax) echo "softmax.log 16384" ;;
  esac
}
weights_bytes() { # DTYPE: the exported model.safetensors' size, from the shipped one's (F32)
  local f=models/mnist/model.safetensors head
  head=$(od -An -t u8 -N8 "$f" | tr -d ' ')
  if [ "$1" = F32 ]; then stat -c %s "$f"
  else echo $((8 + head + ($(stat -c %s "$f") - 8 - head) / 2)); fi # 2 bytes a number, not 4
}
weight_parts() { # the parts of the averaged weights in the dtype this call's limits allow
  local dtype n i bytes
  dtype=$(weights_dtype)
  bytes=$(weights_bytes "$dtype")
  n=$(((bytes + PART_B - 1) / PART_B))
  for ((i = 0; i < n; i++)); do
    printf 'weights.part-%02d %d\n' $i $((i < n - 1 ? PART_B : bytes - (n - 1) * PART_B))
  done
}
# F32 when its parts and the rest of call 2's files fit what comes back, else BF16 (LEASE_WEIGHTS)
weights_dtype() {
  [ -n "${LEASE_WEIGHTS:-}" ] && { echo "$LEASE_WEIGHTS"; return; }
  local others files total parts bytes s
  others=$(for s in ${CALLS[1]}; do [ "$s" = train-end ] || CALL=2 back_of "$s"; done |
    awk '{ n++; t += $2 } END { print n + 0, t + 0 }')
  # + the call's log, train.log and weights.json
  files=$((${others% *} + 3)) total=$((${others#* } + MiB + MiB / 4 + MiB / 2))
  bytes=$(weights_bytes F32)
  parts=$(((bytes + PART_B - 1) / PART_B))
  if [ $((files + parts)) -le "$BACK_FILES" ] && [ $((total + bytes)) -le "$BACK_TOTAL_B" ]; then
    echo F32
  else echo BF16; fi
}

# ---- what travels: the tree (tracked, and untracked that git does not ignore) and .gpu --------
# .gpu's parts where they are not made yet: deps, Debian's four packages' files (dpkg -L here:
# nlohmann-json3-dev 1.2 MB, libcli11-dev 0.4, libstb-dev 2.7, libgtest-dev 1.4); mnist.tgz, the
# last lease's (11.6 MB, issue 13's note); init, the weights in the dtype that fits.
travel() { # prints "NAME BYTES NOTE" lines, the last "total BYTES"
  local tracked untracked deps data init_f32 init dtype
  tracked=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | sum_of)
  untracked=$(git ls-files -z -o --exclude-standard | xargs -0 -r stat -c %s | sum_of)
  echo "tracked $tracked git ls-files"
  echo "untracked $untracked not ignored by git"
  if [ -d .gpu/deps ]; then
    deps=$(du -sb .gpu/deps | cut -f1)
    echo "deps $deps .gpu/deps"
  else
    deps=5700000
    echo "deps $deps estimate: .gpu/deps not made (prepare)"
  fi
  if [ -f .gpu/mnist.tgz ]; then
    data=$(stat -c %s .gpu/mnist.tgz)
    echo "mnist.tgz $data .gpu/mnist.tgz"
  else
    data=11600000
    echo "mnist.tgz $data estimate: the last lease's"
  fi
  init_f32=$(weights_bytes F32)
  if [ -f .gpu/init/model.safetensors ]; then
    init=$(du -sb .gpu/init | cut -f1)
    echo "init $init .gpu/init"
  else
    dtype=$(init_dtype "$((tracked + untracked + deps + data))")
    init=$(weights_bytes "$dtype")
    local f32=$((tracked + untracked + deps + data + init_f32))
    [ "$dtype" = BF16 ] && dtype="BF16: F32 would make $(mib $f32) MiB"
    echo "init $init $dtype"
  fi
  echo "total $((tracked + untracked + deps + data + init))"
}
init_dtype() { # OTHER_BYTES: the init's dtype, F32 where it fits beside the rest
  [ $(($1 + $(weights_bytes F32))) -le "$TRAVEL_B" ] && echo F32 || echo BF16
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
minutes() { awk -v s="$1" 'BEGIN { printf "%.1f", s / 60 }'; }
sum_of() { awk '{ t += $1 } END { print t + 0 }'; } # of the numbers on stdin, one a line

# ---- the clock and the plan -----------------------------------------------------------------
now() { if [ -n "$PLAN$DRY" ]; then echo "$CLOCK"; else echo "$SECONDS"; fi; }
say() { [ -z "$PLAN" ] && echo "== [$(now) s] $*"; return 0; }
run() { if [ -n "$DRY" ]; then echo "dry: $*" >&3; else "$@"; fi; } # fd 3: the call's log
left() { echo $((CALL_S - $(now))); }
STEPS=() # this invocation's steps, and the one running
AT=0
RAN=0

# begin STEP: whether an atomic step runs: on the plan's clock it is counted (and does not run);
# otherwise it runs when its estimate fits what is left of the call, and says so when it does not
begin() {
  local e l
  if [ "$1" = train-wait ]; then e=$(wait_estimate); else e=$(est "$1"); fi
  if [ -n "$PLAN" ]; then
    echo "at $CALL $1 $CLOCK"
    [ "$1" = train-wait ] && echo "wait $CALL $e"
    CLOCK=$((CLOCK + e))
    return 1
  fi
  l=$(left)
  if [ "$e" -gt "$l" ]; then
    say "skipped: $1: its estimate is $e s, and $l s are left of this call's $CALL_S"
    return 1
  fi
  say "$1 (estimate $e s; $l s left of this call's $CALL_S)"
  RAN=$e # DRY=1: the clock moves on by it once the step is done
  return 0
}

declare -A ITEMS # each divisible step's items, listed once
list_items() {
  local s
  for s in bench profile softmax; do
    ITEMS[$s]=$("items_$s")
    touch "$L/$s.done"
  done
}
pending() { # STEP: its items not done yet in this lease
  awk 'FILENAME == ARGV[1] { done[$1] = 1; next } !($1 in done)' "$L/$1.done" - <<<"${ITEMS[$1]}"
}
reserve() { # seconds the steps after this one in this invocation need
  local i s t=0
  for ((i = AT + 1; i < ${#STEPS[@]}; i++)); do
    s=${STEPS[i]}
    if divisible "$s"; then t=$((t + $(pending "$s" | awk '{ t += $2 } END { print t + 0 }')))
    else t=$((t + $(est "$s"))); fi
  done
  echo $t
}
later_call_has() { # STEP: a later one of the three calls runs it too (the rest waits for it)
  [[ $CALL =~ ^[0-9]+$ ]] || return 1
  local n
  for ((n = CALL; n < ${#CALLS[@]}; n++)); do [[ " ${CALLS[n]} " == *" $1 "* ]] && return 0; done
  return 1
}

# items STEP RUNNER: the step's items not yet done, each while its estimate fits what the call has
# left after the steps that follow. On the plan's clock the last call that has the step takes
# whatever is left, fitting or not, so that a plan that does not fit shows it.
items() {
  local step=$1 runner=$2 list id e rest ran=0 total before room take_all=""
  list=$(pending "$step")
  total=$(grep -c . <<<"${ITEMS[$step]}")
  before=$((total - $(grep -c . <<<"$list")))
  [ -n "$PLAN" ] && ! later_call_has "$step" && take_all=1
  [ -n "$PLAN" ] && echo "at $CALL $step $CLOCK"
  [ -z "$list" ] && say "$step: all $total done"
  while read -r id e rest; do
    [ -z "$id" ] && break
    room=$(($(left) - $(reserve)))
    if [ "$e" -gt "$room" ] && [ -z "$take_all" ]; then
      if [ -z "$PLAN" ] && later_call_has "$step"; then
        say "$step: no room for $id and the $((total - before - ran - 1)) after it (estimate" \
          "$e s, $room s left before the steps after it): left for the next call"
      elif [ -z "$PLAN" ]; then
        say "skipped: $step: $((total - before - ran)) of $total not run, no room (the next" \
          "one's estimate is $e s, $room s left)"
      fi
      break
    fi
    [ -z "$PLAN" ] && "$runner" "$id" "$e" $rest
    [ -n "$PLAN$DRY" ] && CLOCK=$((CLOCK + e))
    echo "$id" >>"$L/$step.done"
    ran=$((ran + 1))
  done <<<"$list"
  [ -n "$PLAN" ] && echo "items $CALL $step $((before + 1)) $((before + ran)) $total"
  return 0
}

# simulate: every standard call's steps on the plan's clock. Prints "at CALL STEP SECONDS",
# "items CALL STEP FIRST LAST OF" and "call N SECONDS" lines.
simulate() {
  (
    PLAN=1
    L=$(mktemp -d)
    trap 'rm -rf "$L"' EXIT
    list_items
    for CALL in 1 2 3; do
      read -ra STEPS <<<"${CALLS[CALL - 1]}"
      CLOCK=0
      for ((AT = 0; AT < ${#STEPS[@]}; AT++)); do step "${STEPS[AT]}"; done
      echo "call $CALL $CLOCK"
    done
  )
}

do_plan() {
  local sim bad=0 n total desc files bytes line
  sim=$(simulate)
  for n in 1 2 3; do
    total=$(awk -v n=$n '$1 == "call" && $2 == n { print $3 }' <<<"$sim")
    desc=$(for s in ${CALLS[n - 1]}; do
      if divisible "$s"; then
        awk -v n=$n -v s="$s" '$1 == "items" && $2 == n && $3 == s {
          if ($5 < $4) print s "(none)"; else if ($4 == 1 && $5 == $6) print s "(" $6 ")";
          else print s "(" $4 "-" $5 " of " $6 ")" }' <<<"$sim"
      elif [ "$s" = train-wait ]; then
        awk -v n=$n '$1 == "wait" && $2 == n { print "train-wait(" $3 " s)" }' <<<"$sim"
      else echo "$s"; fi
    done | tr '\n' ' ')
    printf 'call %d: %s min  %s\n' $n "$(minutes "$total")" "${desc% }"
    if [ "$total" -gt "$CALL_S" ]; then
      echo "  over $((CALL_S / 60)) minutes: at run time what does not fit is skipped"; bad=1
    fi
    files=$( (CALL=$n; echo "log-$n.txt $MiB"; for s in ${CALLS[n - 1]}; do back_of "$s"; done) |
      awk '!seen[$1]++')
    while read -r f b; do
      echo "back: $f $(mib "$b") MiB"
      [ "$b" -gt "$BACK_FILE_B" ] && { echo "  $f: over $(mib "$BACK_FILE_B") MiB"; bad=1; }
    done <<<"$files"
    line=$(awk '{ n++; t += $2 } END { print n, t }' <<<"$files")
    if [ "${line% *}" -gt "$BACK_FILES" ] || [ "${line#* }" -gt "$BACK_TOTAL_B" ]; then
      echo "  back: ${line% *} files, $(mib "${line#* }") MiB: over $BACK_FILES files or" \
        "$(mib "$BACK_TOTAL_B") MiB"
      bad=1
    fi
  done
  local tr tot
  tr=$(travel)
  tot=$(awk '$1 == "total" { print $2 }' <<<"$tr")
  echo "travels: $(mib "$tot") MiB of $(mib "$TRAVEL_B"): $(awk '$1 != "total" {
    note = $3; for (i = 4; i <= NF; i++) note = note " " $i
    printf "%s%s %.1f (%s)", sep, $1, $2 / 1048576, note; sep = ", " }' <<<"$tr")"
  [ "$tot" -gt "$TRAVEL_B" ] && { echo "  travels: over $(mib "$TRAVEL_B") MiB"; bad=1; }
  local start1 end1 te2 s
  start1=$(awk '$1 == "at" && $2 == 1 && $3 == "train-start" { print $4 }' <<<"$sim")
  te2=$(awk '$1 == "at" && $2 == 2 && $3 == "train-end" { print $4 }' <<<"$sim")
  end1=$(awk '$1 == "call" && $2 == 1 { print $3 }' <<<"$sim")
  s=$((end1 - start1 + GAP_S + te2 - 30))
  echo "training: $(minutes $s) min, from call 1's $start1 s to 30 s before train-end at call" \
    "2's $te2 s (the gap between calls $GAP_S s); the rate's decay over the last half; weights" \
    "back as $(weights_dtype)"
  echo "cards: an H100, or an H200 when no H100 is free: sm_90 either way; the estimates are the" \
    "H100's, bounds on an H200 (the same arithmetic, 1.4 times the memory bandwidth); the memory" \
    "is the card's own (nvidia-smi in the log, the engine's batch from what is free)"
  echo "estimates (seconds, source):"
  estimates | sed 's/^/  /'
  echo "  train-wait: what the plan leaves, the trainer alone on the GPU: each call's room after its" \
    "steps, as far as the rest of the lease fits after it, less $WAIT_MARGIN s (wait_estimate)"
  local runs
  runs=$(items_bench | awk '{ t += $2; n++ } END { print t " in " n " runs:" }')
  echo "  bench $runs the H100's rates of 2026-11-25, each precision's slowest (bf16: tf32's), and" \
    "1 s a start (run_estimate); sample and score timed"
  return $bad
}

# ---- the steps that run there -----------------------------------------------------------------
training() { [ -f "$L/train.pid" ] && kill -0 "$(cat "$L/train.pid")" 2>/dev/null; }
REBUILT= # need_build's one build again in this call
need_build() {
  [ -n "$DRY" ] && return 0
  if [ ! -x "$T" ] && [ -z "$REBUILT" ] && [ -f "$B/build.ninja" ]; then
    REBUILT=1
    say "no $T: building again (ninja goes on where the last build stopped, from the tree as" \
      "this call brought it)"
    build_all
  fi
  [ -x "$T" ] && return 0
  say "skipped: no $T (the build failed or did not run)"
  return 1
}
bounded() { # SECONDS CMD...: CMD, killed when the call's time runs out
  local s=$1
  shift
  [ "$s" -lt 1 ] && s=1
  run timeout "$s" "$@"
}

step_build() {
  begin build || return 0
  # the card as it is: its name and memory (nothing here assumes an H100's 80 GB)
  run nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version,clocks.max.sm \
    --format=csv,noheader
  if [ ! -d data/mnist ] && [ -f .gpu/mnist.tgz ]; then
    mkdir -p data && tar xzf .gpu/mnist.tgz -C data
  fi
  local py deps=$PWD/.gpu/deps/usr
  py=$(command -v "$PY")
  # sm_90 on an H100 and an H200 alike (CUDA_ARCH for another card)
  if ! run cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90-real}" -DCMAKE_PREFIX_PATH="$deps" \
    -DTARNN_TORCH_PYTHON="$py" -DPython_EXECUTABLE="$py" -DTARNN_PYTHON=OFF -DTARNN_SERVE=OFF \
    >"$L/build.log" 2>&1; then
    tail -30 "$L/build.log"
    say "configure failed: the steps that need the build will say so"
    return 0
  fi
  REBUILT=1 # not again in this call: the same tree would fail the same way
  build_all
}
# build_all: everything, on past a target that fails (ninja -k 0): one test shim that did not
# compile cost the lease of 2026-11-25 its tarnn. Then tarnn and every gpu-labelled test program
# are checked: the failed targets are named, and whether the GPU steps can go on.
build_all() {
  local failed missing p
  bounded "$(left)" cmake --build $B -j"$(nproc)" -- -k 0 >"$L/build.last" 2>&1
  local rc=$?
  cat "$L/build.last" >>"$L/build.log"
  [ -n "$DRY" ] && { say "built"; return 0; }
  failed=$(sed -n -E 's/^FAILED: (\[code=[0-9]+\] )?//p' "$L/build.last" | sort -u | tr '\n' ' ')
  missing=$(for p in "$T" $(gpu_tests all | awk '{ for (i = 1; $i ~ /=/; i++); print $i }'); do
    [ -x "$p" ] || echo "$p"
  done | sort -u | tr '\n' ' ')
  if [ $rc -ne 0 ]; then
    grep -B2 -A8 -m5 "error" "$L/build.last" | head -60
  fi
  if [ -n "$missing" ]; then
    say "build failed${failed:+ for ${failed% }}: no ${missing% }: the steps that need it say so," \
      "and the first of them in a later call builds again"
  elif [ $rc -ne 0 ]; then
    say "build: failed for ${failed% }; every program the GPU steps need is built (tarnn and the" \
      "gpu-labelled tests'): they go on"
  else
    say "built"
  fi
}

# detached LOG CMD...: CMD in its own session (setsid), to outlive the call, in the background
# ($! its pid): stdin /dev/null, stdout and stderr appended to LOG, and every other descriptor
# closed. One it kept (fd 3, the call's log's pipe, was one) holds the call's output open, and the
# device tool waits for its end: call 1 of the lease of 2026-11-25 ended its steps at 177 s and
# returned at its 600-s limit (tests/tools/lease_dry_run.sh, a stand-in trainer).
detached() {
  local log=$1 fd
  shift
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    exec setsid "$@" </dev/null >>"$log" 2>&1
  ) &
}

# wait_estimate: train-wait's seconds in this call: the room its call leaves after its other steps,
# as far as the work of the calls after it (their steps, and every item of bench, profile and
# softmax not done yet) still fits them, less WAIT_MARGIN a call
wait_estimate() {
  [[ $CALL =~ ^[0-9]+$ ]] || { echo 0; return; }
  local n i s here=0 rest=0 items=0 calls w
  for s in ${CALLS[CALL - 1]}; do
    [ "$s" = train-wait ] || divisible "$s" || here=$((here + $(est "$s")))
  done
  for ((n = CALL; n < ${#CALLS[@]}; n++)); do
    for s in ${CALLS[n]}; do
      [ "$s" = train-wait ] || divisible "$s" || rest=$((rest + $(est "$s")))
    done
  done
  for s in bench profile softmax; do
    items=$((items + $(pending "$s" | awk '{ t += $2 } END { print t + 0 }')))
  done
  calls=$((${#CALLS[@]} - CALL + 1))
  w=$((calls * (CALL_S - WAIT_MARGIN) - here - rest - items))
  i=$((CALL_S - WAIT_MARGIN - here))
  [ "$i" -lt "$w" ] && w=$i
  echo $((w > 0 ? w : 0))
}

# train-wait: the trainer alone on the GPU for what the plan leaves (the timed steps cannot run
# beside it), until the second of the call where the plan ends the wait: the call's steps back on
# the plan's clock, from which train-start set the trainer's deadline (in call 2, 30 s before the
# wait's end); at most to the call's last WAIT_MARGIN seconds, and no longer than the trainer runs
step_train_wait() {
  begin train-wait || return 0
  [[ $CALL =~ ^[0-9]+$ ]] || { say "train-wait: only in a call (lease.sh call 1|2)"; return 0; }
  local until_s
  until_s=$(simulate | awk -v c="$CALL" '$1 == "at" && $2 == c && $3 == "train-wait" { a = $4 }
    $1 == "wait" && $2 == c { w = $3 } END { print a + w }')
  [ "$until_s" -gt $((CALL_S - WAIT_MARGIN)) ] && until_s=$((CALL_S - WAIT_MARGIN))
  say "the trainer alone on the GPU: until [$until_s s] of this call (the plan's), or its end"
  if [ -n "$DRY" ]; then
    RAN=$((until_s > $(now) ? until_s - $(now) : 0))
    return 0
  fi
  while training && [ "$(now)" -lt "$until_s" ]; do sleep 2; done
  [ -f "$L/train.log" ] && grep "heldout" "$L/train.log" | tail -2
  return 0
}

step_train_start() {
  begin train-start || return 0
  local init=models/mnist sim end_at wait_s
  [ -f .gpu/init/model.safetensors ] && init=.gpu/init
  # the deadline: the plan's end of call 1, the gap, and train-end's start in call 2, less 30 s
  sim=$(simulate)
  end_at=$(awk -v t0="$(date +%s)" -v now="$(now)" -v gap=$GAP_S '
    $1 == "call" && $2 == 1 { end1 = $3 } $1 == "at" && $2 == 2 && $3 == "train-end" { te = $4 }
    END { printf "%d\n", t0 - now + end1 + gap + te - 30 }' <<<"$sim")
  [ -n "${TRAIN_MINUTES:-}" ] && end_at=$(($(date +%s) + ${TRAIN_MINUTES%.*} * 60))
  echo "$end_at" >"$L/train.end"
  say "training from $init until $(date -d @"$end_at" +%T)" \
    "($(((end_at - $(date +%s)) / 60)) min), in its own session"
  # shellcheck disable=SC2206 # TRAIN_ARGS: flags, split at spaces
  local cmd=("$PY" tools/train.py --init-from "$init" --train data/mnist/train-images-idx3-ubyte
    --heldout data/mnist/valid-images-idx3-ubyte --ckpt "$L/train.pt" --ckpt-minutes 1
    --end-at "$end_at" --time-decay 0.5 --ema 0.999 --ema-from-decay --eval-every 500
    --eval-images 1000
    --compile-timeout 120 --rate-seconds 60 --rate-file "$L/train-rate.json" $TRAIN_ARGS)
  if [ -n "$DRY" ]; then
    run "${cmd[@]}"
    return 0
  fi
  rm -f "$L/train-rate.json"
  PYTHONUNBUFFERED=1 detached "$L/train.log" "${cmd[@]}"
  echo $! >"$L/train.pid"
  # nothing else on the GPU until its rate is measured alone: start-up, compile, 60 s
  wait_s=$(($(est train-start) + 30))
  while [ ! -f "$L/train-rate.json" ] && training && [ "$wait_s" -gt 0 ] &&
    [ $SECONDS -lt $((CALL_S - 30)) ]; do
    sleep 2
    wait_s=$((wait_s - 2))
  done
  grep -E "^(initialised|resumed|--compile|rate|fresh|batch|training)" "$L/train.log"
  if [ -f "$L/train-rate.json" ]; then cp "$L/train-rate.json" "$OUT/"
  elif training; then say "no rate measured yet: the trainer is still starting; the tests go on"
  else say "the trainer stopped: $(tail -2 "$L/train.log")"; fi
  cp "$L/train.log" "$OUT/train.log"
}

step_test() {
  begin test || return 0
  need_build || return 0
  say "the GPU suite: ctest -L gpu, once"
  bounded "$(left)" ctest --test-dir $B -L gpu --timeout 300 --output-on-failure \
    >>"$OUT/tests.log" 2>&1
  grep -E "max error|identical|FAILED|Passed|Failed|tests passed|Skipped" "$OUT/tests.log" |
    tail -40
  # the checkpoint guard on this machine's torch, which CI's (1.13) cannot stand in for
  bounded "$(left)" "$PY" tools/gpu/checkpoint_guard.py >>"$OUT/tests.log" 2>&1
  grep "checkpoint guard on torch" "$OUT/tests.log"
}

step_maps() {
  begin maps || return 0
  local m
  for m in $MAPS; do
    [ "$m" = elu+1 ] || [ -f "$L/maps/$m/model.safetensors" ] && continue
    run "$PY" tools/random_model.py --config mnist --seed 2 --feature-map "$m" \
      --out "$L/maps/$m" >/dev/null
  done
}

# gpu_tests [all]: "ENV... PROGRAM ARGS" for every gpu-labelled test that is a program (not a
# script); all: test_cuda too (the sanitizers leave it out)
gpu_tests() {
  if [ -n "$DRY" ] && [ ! -f $B/CTestTestfile.cmake ]; then
    echo "TARNN_KERNELS=cuda $B/tests/test_kernels"
    return
  fi
  [ -f $B/CTestTestfile.cmake ] || return 0
  ctest --test-dir $B -L gpu --show-only=json-v1 | "$PY" -c '
import json, os, sys
for t in json.load(sys.stdin)["tests"]:
    cmd = t.get("command") or []
    if not cmd or not cmd[0].startswith(os.path.abspath(sys.argv[1])):
        continue  # scripts
    if t["name"] == "test_cuda" and sys.argv[2] != "all":
        continue  # its full-size rollouts outlast any sanitizer (2026-11-22)
    env = [e for p in t.get("properties", []) if p["name"] == "ENVIRONMENT" for e in p["value"]
           if " " not in e]
    print(" ".join(env + cmd))' "$B" "${1:-}"
}

step_sanitize() {
  begin sanitize || return 0
  need_build || return 0
  if [ -z "$DRY" ] && ! command -v compute-sanitizer >/dev/null; then
    say "skipped: no compute-sanitizer here"
    return 0
  fi
  local stop_at line rc envs prog w
  stop_at=$(($(now) + 60))
  while read -r line; do
    envs=() prog=""
    for w in $line; do
      if [[ $w == *=* ]] && [ -z "$prog" ]; then envs+=("$w"); else prog="$prog $w"; fi
    done
    echo "-- memcheck:${envs[*]:+ ${envs[*]}}$prog" >>"$OUT/sanitize.log"
    # shellcheck disable=SC2086
    bounded $((stop_at - $(now))) env "${envs[@]}" compute-sanitizer --tool memcheck \
      --error-exitcode 9 $prog >>"$OUT/sanitize.log" 2>&1
    rc=$?
    say "memcheck$prog: $(sanitizer_verdict $rc)"
  done < <(gpu_tests)
  echo "-- racecheck: the attention kernels' cases" >>"$OUT/sanitize.log"
  bounded 60 env TARNN_KERNELS=cuda compute-sanitizer --tool racecheck --error-exitcode 9 \
    $B/tests/test_kernels --gtest_filter='*linear_attention*' >>"$OUT/sanitize.log" 2>&1
  rc=$?
  say "racecheck over the attention kernels: $(sanitizer_verdict $rc)"
}
sanitizer_verdict() { # RC: in words, with the log's summary
  [ -n "$DRY" ] && { echo "dry"; return; }
  local summary
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Device not supported|PASSED|FAILED" \
    "$OUT/sanitize.log" | tail -3 | tr '\n' ' ')
  case $1 in
    0) echo "clean ($summary)" ;;
    9) echo "ERRORS ($summary)" ;;
    124) echo "stopped at its time (the tests it finished are in sanitize.log)" ;;
    *) echo "exit $1: $(grep -m1 -iE "error|not supported" "$OUT/sanitize.log" | cut -c1-160)" ;;
  esac
}

stop_trainer() { # on its own by its deadline (its decay done), else SIGTERM: it checkpoints
  training || return 0
  local end_at
  end_at=$(cat "$L/train.end" 2>/dev/null || echo 0)
  while training && [ "$(date +%s)" -lt $((end_at + 60)) ] && [ "$(left)" -gt 60 ]; do sleep 1; done
  if training; then
    say "the trainer is past its deadline (or the call's time is short): SIGTERM, it" \
      "checkpoints; its decay is not finished"
    kill -TERM "$(cat "$L/train.pid")"
    while training; do sleep 1; done
  fi
}

step_train_end() {
  begin train-end || return 0
  stop_trainer
  if [ -f "$L/train.log" ]; then tail -12 "$L/train.log"; cp "$L/train.log" "$OUT/train.log"; fi
  local dtype score=$L/score.json m=$L/m-trained which=averaged ema=(--ema) use=(--use-ema)
  dtype=$(weights_dtype)
  # the weights the trainer's end says to keep (train.py's `end:` line: the better of the last and
  # the averaged on the held-out digits); the averaged where it did not say
  if [ "$(sed -n -E 's/^end: .*keep: (averaged|last).*/\1/p' "$L/train.log" 2>/dev/null |
    tail -1)" = last ]; then
    which=last ema=() use=()
  fi
  if [ ! -f "$L/train.pt" ]; then # DRY=1 without a stand-in checkpoint: the commands
    say "no checkpoint $L/train.pt: nothing to export"
    [ -n "$DRY" ] || return 0
    run "$PY" tools/export.py "$L/train.pt" --out "$m" "${ema[@]}" --dtype "$dtype"
    run "$T" score --device cuda --model "$m" --images "$TEST_IMAGES" --quiet --json-file "$score"
    torch_score "${use[@]}"
    return 0
  fi
  say "the $which weights (train.log), $dtype, back in parts at once; then scored"
  rm -rf "$m"
  if ! "$PY" tools/export.py "$L/train.pt" --out "$m" "${ema[@]}" --dtype "$dtype"; then
    say "export failed"
    return 0
  fi
  "$PY" tools/gpu/weights.py pack "$m" "$OUT" --part-bytes "$PART_B" --dtype "$dtype"
  local device=cuda
  [ -n "$DRY" ] && device=cpu # the proof here (lease_pack_join): the CPU engine plays the GPU
  timeout "$(left)" "$T" score --device $device --model "$m" --images "$TEST_IMAGES" --quiet \
    --json-file "$score" &&
    "$PY" tools/gpu/weights.py scored "$OUT/weights.json" "$score" "$TEST_IMAGES"
  torch_score "${use[@]}"
}
torch_score() { # [--use-ema]: PyTorch's fp32 figure for the same weights, beside the engine's
  run "$PY" tools/train.py --eval-only "$@" --ckpt "$L/train.pt" --batch 250 \
    --heldout "$TEST_IMAGES"
}

# bench_one ID SECONDS WHAT ARGS...: one timed run; its JSON, or its error, into bench-CALL.jsonl
bench_one() {
  local id=$1 e=$2 what=$3 cap err
  shift 3
  cap=$((3 * e + 10))
  [ "$cap" -gt "$(left)" ] && cap=$(left)
  rm -f "$L/b.json" "$L/b.err"
  echo "-- $id"
  case $what in
    bench) # MAP P S BATCH [PATH]
      local model=(--shape mnist) batch=(--batch 4096)
      [ "$1" != elu+1 ] && model=(--model "$L/maps/$1")
      [ "$4" = auto ] && batch=(--batch 0 --steps 100)
      if [ "$1" != elu+1 ] && [ -z "$DRY" ] && [ ! -f "$L/maps/$1/model.safetensors" ]; then
        echo "no $L/maps/$1 (the maps step did not make it)" >"$L/b.err"
      else
        local settings=${5:-} # comma-separated (BENCH_PATHS)
        # shellcheck disable=SC2086
        bounded $cap env ${settings//,/ } "$T" bench --device cuda "${model[@]}" "${batch[@]}" \
          --precision "$2" --state "$3" --quiet --json-file "$L/b.json" 2>"$L/b.err" | tail -1
      fi ;;
    sample) # the wall time and peak memory of the whole command, start and PNG included
      bounded $cap /usr/bin/time -v "$T" sample --device cuda --model models/mnist -n 10000 \
        --seed 1 --precision "$1" --state "$2" -o "$L/s.png" --quiet --json-file "$L/b.json" \
        2>"$L/b.err"
      grep -E "Elapsed|Maximum resident" "$L/b.err" ;;
    score)
      bounded $cap "$T" score --device cuda --model models/mnist --images "$TEST_IMAGES" \
        --precision "$1" --state "$2" --quiet --json-file "$L/b.json" 2>"$L/b.err" | tail -1 ;;
    complete)
      bounded $cap "$T" bench --device cuda --complete --model models/mnist --precision "$1" \
        --state "$2" --quiet --json-file "$L/b.json" 2>"$L/b.err" | tail -1 ;;
    cifar10)
      bounded $cap "$T" bench --device cuda --shape cifar10 --batch 4096 --steps 300 \
        --precision "$1" --state "$2" --quiet --json-file "$L/b.json" 2>"$L/b.err" | tail -1 ;;
  esac
  if [ -f "$L/b.json" ]; then
    { printf '{"id": "%s", "result": ' "$id"; tr -d '\n' <"$L/b.json"; echo "}"; } \
      >>"$OUT/bench-$CALL.jsonl"
  elif [ -z "$DRY" ]; then
    err=$(grep -v -E "^\s|Command being timed" "$L/b.err" 2>/dev/null | head -1 |
      tr -d '"\\' | cut -c1-200)
    echo "$id: ${err:-no result}"
    printf '{"id": "%s", "error": "%s"}\n' "$id" "${err:-no result}" >>"$OUT/bench-$CALL.jsonl"
  fi
  return 0
}

step_bench() {
  if [ -z "$PLAN" ]; then
    if training; then
      echo "lease.sh: a trainer is running: stop it (train-end) before anything is timed" >&2
      say "skipped: bench: a trainer is running"
      return 0
    fi
    need_build || return 0
  fi
  items bench bench_one
}

profile_one() { # ID SECONDS P S: ncu over one step at 4,096 images
  local id=$1 p=$3 s=$4 k=61
  if [ -z "$DRY" ]; then # the window: the kernels of one step's graph, after two steps
    "$T" bench --device cuda --shape mnist --batch 4096 --steps 2 --precision "$p" --state "$s" \
      --quiet --json-file "$L/k.json" >/dev/null &&
      k=$("$PY" -c "import json; print(json.load(open('$L/k.json'))['kernels_per_step'])")
  fi
  say "ncu, $p GEMMs, $s state: $k kernels a step"
  bounded $(($(left) < 90 ? $(left) : 90)) ncu --csv --launch-skip $((2 * k)) --launch-count "$k" \
    --metrics "$NCU_METRICS" \
    "$T" bench --device cuda --shape mnist --batch 4096 --steps 3 --precision "$p" --state "$s" \
    --quiet >"$L/$id.csv" 2>"$L/ncu.err" ||
    say "ncu: $(grep -m1 -iE "error|==ERROR==" "$L/ncu.err" | cut -c1-160)"
  local csvs=("$L"/ncu-*.csv)
  [ -z "$DRY" ] && tar czf "$OUT/ncu.tgz" -C "$L" "${csvs[@]##*/}"
  return 0
}

step_profile() {
  if [ -z "$PLAN" ]; then
    if training; then say "skipped: profile: a trainer is running"; return 0; fi
    need_build || return 0
    [ -n "$DRY" ] || command -v ncu >/dev/null || { say "skipped: profile: no ncu here"; return 0; }
  fi
  items profile profile_one
}

softmax_one() { # ID SECONDS BATCH
  say "PyTorch on the GPU, batch $3: softmax (KV cache) against linear (RNN form)"
  bounded $((3 * $2 < $(left) ? 3 * $2 : $(left))) "$PY" tools/gpu/softmax_baseline.py \
    --batch "$3" >>"$OUT/softmax.log" 2>&1
  [ -z "$DRY" ] && tail -2 "$OUT/softmax.log"
  return 0
}

step_softmax() {
  [ -z "$PLAN" ] && training && { say "skipped: softmax: a trainer is running"; return 0; }
  items softmax softmax_one
}

step() { # STEP: one step, by name
  case $1 in
    build) step_build ;;
    train-start) step_train_start ;;
    train-wait) step_train_wait ;;
    test) step_test ;;
    maps) step_maps ;;
    sanitize) step_sanitize ;;
    train-end) step_train_end ;;
    bench) step_bench ;;
    profile) step_profile ;;
    softmax) step_softmax ;;
    *) echo "lease.sh: unknown step $1" >&2; exit 2 ;;
  esac
}

back_summary() { # what $OUT holds now, against the limits
  local n t
  n=$(find "$OUT" -type f | wc -l)
  t=$(find "$OUT" -type f -printf '%s\n' | awk '{ t += $1 } END { print t + 0 }')
  find "$OUT" -type f -printf 'back: %f %s\n' |
    awk '{ printf "%s %s %.2f MiB\n", $1, $2, $3 / 1048576 }'
  echo "back: $n files, $(mib "$t") MiB (at most $BACK_FILES, $(mib "$BACK_FILE_B") MiB each," \
    "$(mib "$BACK_TOTAL_B") in all)"
  if [ "$n" -gt "$BACK_FILES" ] || [ "$t" -gt "$BACK_TOTAL_B" ] ||
    [ -n "$(find "$OUT" -type f -size +$((BACK_FILE_B / 1024))k)" ]; then
    echo "lease.sh: what comes back breaks the limits: the device tool will leave some of it behind"
  fi
}

# ---- here: prepare, join ----------------------------------------------------------------------
do_prepare() { # [MODEL]: what is missing of .gpu/ (ignored by git: each call carries it)
  local ok=0 tmp
  mkdir -p .gpu
  if [ ! -d .gpu/deps ]; then # the build's headers and gtest, which nothing there can fetch
    tmp=$(mktemp -d)
    if (cd "$tmp" && apt-get download nlohmann-json3-dev libcli11-dev libstb-dev libgtest-dev); then
      for deb in "$tmp"/*.deb; do dpkg -x "$deb" .gpu/deps; done
      echo "prepare: .gpu/deps from $(cd "$tmp" && ls *.deb | tr '\n' ' ')"
    else echo "lease.sh: apt-get download failed: .gpu/deps is not made" >&2; ok=1; fi
    rm -rf "$tmp"
  fi
  if [ ! -f .gpu/mnist.tgz ]; then
    if [ -d data/mnist ]; then
      tar czf .gpu/mnist.tgz -C data mnist && echo "prepare: .gpu/mnist.tgz"
    else
      echo "lease.sh: no data/mnist (tools/mnist_data.py makes it): .gpu/mnist.tgz is not made" >&2
      ok=1
    fi
  fi
  if [ $# -gt 0 ]; then
    [ -f "$1/model.safetensors" ] || { echo "lease.sh: $1 is not a model folder" >&2; return 1; }
    rm -rf .gpu/init
    local rest dtype
    rest=$(travel | awk '$1 ~ /^(tracked|untracked|deps|mnist.tgz)$/ { t += $2 } END { print t }')
    dtype=$(init_dtype "$rest")
    "$PY" -c '
import sys; sys.path.insert(0, "tools")
import tarnn_model as tm
m = tm.load_model_dir(sys.argv[1])
tm.save_model_dir(m, ".gpu/init", {"source": sys.argv[1]}, sys.argv[2])' "$1" "$dtype" || return 1
    echo "prepare: .gpu/init from $1 in $dtype (the next lease starts from it, a fresh optimizer)"
  fi
  travel | awk '{ printf "travels: %-10s %6.1f MiB\n", $1, $2 / 1048576 }'
  return $ok
}

case ${1:-} in
  plan) do_plan; exit $? ;;
  prepare) shift; do_prepare "$@"; exit $? ;;
  join)
    [ $# -eq 3 ] || { echo "usage: tools/gpu/lease.sh join DIR MODEL" >&2; exit 2; }
    "$PY" tools/gpu/weights.py join "$2" "$3" --tarnn "${LEASE_TARNN:-build/tarnn}" \
      ${LEASE_IMAGES:+--images "$LEASE_IMAGES"} --limit "${JOIN_LIMIT:-500}"
    exit $? ;;
  call)
    case ${2:-} in 1 | 2 | 3) ;; *) echo "usage: tools/gpu/lease.sh call 1|2|3" >&2; exit 2 ;; esac
    CALL=$2
    read -ra STEPS <<<"${CALLS[CALL - 1]}" ;;
  "") sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 2 ;;
  *) STEPS=("$@") ;;
esac

for s in "${STEPS[@]}"; do # every name known before anything starts
  case " ${CALLS[*]} " in *" $s "*) ;; *)
    echo "lease.sh: unknown step $s (steps: $(echo "${CALLS[*]}" | tr ' ' '\n' | awk '!seen[$0]++' |
      tr '\n' ' ')or plan, prepare, join, call 1|2|3)" >&2
    exit 2 ;;
  esac
done
mkdir -p "$OUT" "$L"
list_items
exec > >(tee -a "$OUT/log-$CALL.txt" "$L/log") 2>&1 3>&1
TEE=$!
# what $OUT holds, last in the log; then the log's last lines written before the call returns
trap 'back_summary; exec >&- 2>&- 3>&-; wait $TEE 2>/dev/null' EXIT
say "call $CALL: ${STEPS[*]} ($CALL_S s planned at most; $(hostname))"
for ((AT = 0; AT < ${#STEPS[@]}; AT++)); do
  RAN=0
  step "${STEPS[AT]}"
  [ -n "$DRY" ] && CLOCK=$((CLOCK + RAN))
done
[ "$CALL" = 1 ] && [ -f "$L/train.log" ] && cp "$L/train.log" "$OUT/train.log"
say "done"
