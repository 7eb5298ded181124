#!/usr/bin/env bash
# Streamed outputs, resuming, shards, JSON on every command, progress and names (issue 17).
# usage: streaming_test.sh TARNN SOURCE_DIR
TARNN=$1
SRC=$2
source "$(dirname "$0")/cli_lib.sh"
need_mnist

# --- memory does not grow with -n: peak RSS of 200,000 images within 10% of 2,000's
peak() { # the peak resident set (KB) of the command, as the kernel counted it
  $PY -c "
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)" "$@"
}
if [ -n "${TARNN_TEST_SANITIZED:-}" ]; then
  # AddressSanitizer keeps freed memory in quarantine (256 MB): RSS there says nothing of ours
  echo "peak RSS check skipped: sanitized build (the release pass checks it)"
else
  small_rss=$(peak "$TARNN" sample --model "$SMALL" -n 2000 --npy "$work/a.npy" --quiet) || bad "sample -n 2000 --npy"
  big_rss=$(peak "$TARNN" sample --model "$SMALL" -n 200000 --npy "$work/b.npy" --quiet) || bad "sample -n 200000 --npy"
  echo "peak RSS: -n 2000 ${small_rss} KB, -n 200000 ${big_rss} KB"
  $PY -c "import sys; sys.exit(not ($big_rss <= 1.10 * $small_rss))" && ok || bad "peak memory grew with -n: $small_rss KB -> $big_rss KB"
fi

# --- progress when stderr is not a terminal (a log, a batch job): a plain line every
# TARNN_PROGRESS_SECONDS (10 by default) and at each batch's end, with count, rate and ETA, no \r;
# --quiet silences it
# --- an interrupt keeps every finished batch: the message counts the images on disk, which are
# the uninterrupted run's first ones, and --resume gives the bytes of an uninterrupted run
# (8 images in batches of 2 in release; in a sanitized build, where an MNIST image takes
# seconds, 4 in batches of 1: interrupted after 2, the second being written). The run is
# interrupted at a known point, whatever the machine's speed: TARNN_TEST_INTERRUPT_AFTER
# (docs/ENVIRONMENT.md) raises SIGINT in it once 2 batches are done, as a Ctrl-C then would.
N=8 B=2
[ -n "${TARNN_TEST_SANITIZED:-}" ] && N=4 B=1
interrupted_after() { # COUNT CMD...: CMD interrupted once COUNT of its outputs are done; exit in $rc
  local after=$1
  shift
  TARNN_TEST_INTERRUPT_AFTER=$after TARNN_PROGRESS_SECONDS=0.000001 "$@" >"$work/out" 2>"$work/err"
  rc=$?
}
expect_ok "$TARNN" sample --model "$MNIST" -n $N --seed 9 --npy "$work/whole.npy" --out-dir "$work/whole" -o "$work/whole.png" --batch $B --threads 1 --quiet
interrupted_after $((2 * B)) "$TARNN" sample --model "$MNIST" -n $N --seed 9 --npy "$work/part.npy" --out-dir "$work/part" -o "$work/part.png" --batch $B --threads 1
[ $rc -eq 130 ] && ok || bad "interrupted run: exit $rc"
grep -qE "^[0-9]+/$N images  [0-9.]+ images/s  ETA [0-9]+:[0-9]{2}:[0-9]{2}$" "$work/err" && ok || bad "no plain progress line: $(head -3 "$work/err")"
grep -q $'\r' "$work/err" && bad "a progress line for a file holds \\r" || ok
grep -qE "interrupted \(signal 2\): [0-9]+ of $N images written; the same command with --resume" "$work/err" && ok || bad "interrupted run: $(tail -1 "$work/err")"
written=$(sed -nE 's/.*interrupted \(signal 2\): ([0-9]+) of.*/\1/p' "$work/err")
expect_eq "${written:-?}" $((2 * B)) "the images written by a run interrupted after 2 batches"
expect_eq "$(find "$work/part" -name '*.png' | wc -l)" "${written:-?}" "the interrupted message counts the PNGs on disk"
grep -q "\"done\": ${written:-?}," "$work/part.npy.partial.json" && ok || bad "the run record: $(cat "$work/part.npy.partial.json")"
for f in "$work/part"/*.png; do
  cmp -s "$f" "$work/whole/$(basename "$f")" || bad "$(basename "$f"): not the uninterrupted run's"
done
# the .npy's partial holds the uninterrupted array's prefix (the header is the final one)
$PY -c "
import sys
whole, part = open('$work/whole.npy', 'rb').read(), open('$work/part.npy.partial', 'rb').read()
keep = len(whole) - ($N - ${written:-0}) * 784
sys.exit(not (len(part) >= keep and part[:keep] == whole[:keep]))" && ok || bad "the partial .npy is not the uninterrupted run's prefix"
[ ! -e "$work/part.npy" ] && [ -e "$work/part.npy.partial" ] && ok || bad "an interrupted .npy must stay partial"
# a resume trusts nothing it reads: each damage below is refused, and leaves the partial as it was
R=(sample --model "$MNIST" -n $N --seed 9 --npy "$work/part.npy" --out-dir "$work/part" -o "$work/part.png" --batch $B --threads 1 --resume)
mkdir -p "$work/keep" && cp -r "$work/part.npy.partial" "$work/part.npy.partial.json" "$work/part" "$work/keep/"
restore() { rm -rf "$work/part" && cp -r "$work/keep/part.npy.partial" "$work/keep/part.npy.partial.json" "$work/keep/part" "$work/"; }
unchanged() { # WHAT: the partial, its record and the folder are as the interrupted run left them
  cmp -s "$work/part.npy.partial" "$work/keep/part.npy.partial" && cmp -s "$work/part.npy.partial.json" "$work/keep/part.npy.partial.json" &&
    diff -r "$work/part" "$work/keep/part" >/dev/null && ok || bad "$1 changed the interrupted run's outputs"
}
# finished work is never thrown away unasked: the same command without --resume is refused, in one
# line naming --resume and --overwrite, and touches nothing; both flags at once are a usage error
expect_error "$work/part, $work/part.npy: an interrupted run wrote ${written:-?} of $N images there (its record: $work/part.npy.partial.json): --resume goes on from there, --overwrite starts over and discards them" \
  "$TARNN" "${R[@]:0:${#R[@]}-1}"
unchanged "a run without --resume"
expect_usage "--resume goes on with an interrupted run, --overwrite starts over: give one" "$TARNN" "${R[@]}" --overwrite
unchanged "--resume --overwrite"
$PY -c "
import os
header = os.path.getsize('$work/whole.npy') - $N * 784  # four bytes inside the first image
f = open('$work/part.npy.partial', 'r+b'); f.seek(header + 300); b = f.read(4); f.seek(header + 300)
f.write(bytes(x ^ 0xff for x in b))"
expect_error "images written before are not those its record" "$TARNN" "${R[@]}"
restore
for done in -5 '"32"' $((N + 1)); do
  sed -i -E "s/\"done\": [0-9]+/\"done\": $done/" "$work/part.npy.partial.json"
  expect_error '"done" must be a whole number of images in [0, '"$N"']' "$TARNN" "${R[@]}"
  cmp -s "$work/part.npy.partial" "$work/keep/part.npy.partial" && ok || bad "a refused record ($done) changed the partial"
  restore
done
mv "$work/part" "$work/gone" && mkdir "$work/part"
expect_error "images were written: remove both to start again" "$TARNN" "${R[@]}"
rm -rf "$work/part" && mv "$work/gone" "$work/part"
# two runs on one output: the second is refused at once and touches nothing, whichever output
# another process holds (flock(1) takes the lock a running tarnn holds; two resumes once raced)
# (the holder says so through a FIFO once it has the lock, and keeps it until told: no timing)
mkfifo "$work/locked" "$work/release"
for held in "$work/part.npy.partial" "$work/part"; do
  flock "$held" -c "echo >'$work/locked'; read -r _ <'$work/release'" &
  holder=$!
  read -r _ <"$work/locked"
  expect_error "${held%.partial}: another tarnn run is writing it" "$TARNN" "${R[@]}"
  echo >"$work/release"
  wait $holder
  cmp -s "$work/part.npy.partial" "$work/keep/part.npy.partial" && cmp -s "$work/part.npy.partial.json" "$work/keep/part.npy.partial.json" && ok || bad "a run refused by the lock on $held changed the output"
done
expect_ok "$TARNN" sample --model "$MNIST" -n $N --seed 9 --npy "$work/part.npy" --out-dir "$work/part" -o "$work/part.png" --batch $B --threads 1 --resume --json
$PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(not (j['resumed_at'] == ${written:-0}))" && ok || bad "--resume did not resume at ${written:-?}: $(cat "$work/out")"
cmp -s "$work/whole.npy" "$work/part.npy" && ok || bad "--resume: other bytes than an uninterrupted run"
diff -r "$work/whole" "$work/part" >/dev/null && ok || bad "--resume: other --out-dir files"
# the grid holds the images written before the interruption, read back from the .npy's partial
cmp -s "$work/whole.png" "$work/part.png" && ok || bad "--resume: another grid than an uninterrupted run"
# --resume of a finished run does nothing and says so, in one line: no image sampled again (the
# outputs' times unchanged); the grid, gone, is drawn again from the images there
stamps() { stat -c '%n %y' "$work/part.npy" "$work/part"/*.png; }
before=$(stamps)
rm "$work/part.png"
expect_ok "$TARNN" "${R[@]}"
expect_eq "$(cat "$work/out")" "$work/part, $work/part.npy: already complete ($N images): nothing sampled; the grid drawn from them -> $work/part.png" "--resume of a finished run"
[ ! -s "$work/err" ] && ok || bad "--resume of a finished run: $(cat "$work/err")"
expect_eq "$(stamps)" "$before" "the finished run's outputs after --resume"
cmp -s "$work/whole.png" "$work/part.png" && ok || bad "--resume of a finished run: another grid"
expect_ok "$TARNN" "${R[@]}" --json
$PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(not (j['resumed_at'] == j['images'] == $N and j['images_per_second'] == 0))" && ok || bad "--resume of a finished run, --json: $(cat "$work/out")"
# --overwrite starts over: the partial and its record discarded, a whole run's bytes
O=(sample --model "$SMALL" -n 8 --seed 2 --batch 2 --npy "$work/o.npy" --out-dir "$work/o")
expect_ok "$TARNN" sample --model "$SMALL" -n 8 --seed 2 --npy "$work/o1.npy" --quiet
interrupted_after 4 "$TARNN" "${O[@]}" --quiet
expect_error "--overwrite starts over" "$TARNN" "${O[@]}"
expect_ok "$TARNN" "${O[@]}" --overwrite --json
$PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(j['resumed_at'] != 0)" && ok || bad "--overwrite resumed: $(cat "$work/out")"
cmp -s "$work/o.npy" "$work/o1.npy" && [ ! -e "$work/o.npy.partial.json" ] && ok || bad "--overwrite: not a whole run's bytes, or its record left"
TARNN_PROGRESS_SECONDS=0.05 "$TARNN" sample --model "$MNIST" -n 2 --batch 1 --threads 1 --out-dir "$work/q" --quiet >/dev/null 2>"$work/err" && ok || bad "--quiet run failed"
[ ! -s "$work/err" ] && ok || bad "--quiet wrote progress: $(head -2 "$work/err")"
expect_error "TARNN_PROGRESS_SECONDS must be a number of seconds" env TARNN_PROGRESS_SECONDS=soon "$TARNN" sample --model "$SMALL" -n 2 --out-dir "$work/x"
[ ! -e "$work/x" ] && ok || bad "a bad TARNN_PROGRESS_SECONDS left an output folder"
# complete in batches (one image's completions each here): the same, for its --out-dir
C=(complete --model "$MNIST" --images "$work/whole.npy" --index 0-2 --samples 2 --seed 5 --batch 2 --threads 1)
expect_ok "$TARNN" "${C[@]}" -o "$work/cw.png" --out-dir "$work/cwhole" --quiet
interrupted_after 4 "$TARNN" "${C[@]}" -o "$work/cp.png" --out-dir "$work/cpart"
[ $rc -eq 130 ] && ok || bad "interrupted complete: exit $rc"
written=$(sed -nE 's/.*interrupted \(signal 2\): ([0-9]+) of 6 completions written to .*/\1/p' "$work/err")
expect_eq "${written:-?}" 4 "complete's completions written when interrupted after 4: $(tail -1 "$work/err")"
expect_eq "$(find "$work/cpart" -name '*.png' | wc -l)" "${written:-?}" "complete's interrupted message counts the PNGs on disk"
for f in "$work/cpart"/*.png; do
  cmp -s "$f" "$work/cwhole/$(basename "$f")" || bad "complete $(basename "$f"): not the uninterrupted run's"
done
[ ! -e "$work/cp.png" ] && ok || bad "an interrupted complete wrote its grid"
# its --out-dir is resumable as sample's: refused without --resume, then resumed, then finished
expect_error "$work/cpart: an interrupted run wrote 4 of 6 completions there (its record: $work/cpart/.tarnn-complete.json): --resume goes on from there, --overwrite starts over" \
  "$TARNN" "${C[@]}" -o "$work/cp.png" --out-dir "$work/cpart"
expect_ok "$TARNN" "${C[@]}" -o "$work/cp.png" --out-dir "$work/cpart" --resume --json --quiet
$PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(j['resumed_at'] != 4)" && ok || bad "complete --resume: $(cat "$work/out")"
diff -r "$work/cwhole" "$work/cpart" >/dev/null && cmp -s "$work/cw.png" "$work/cp.png" && ok || bad "complete --resume: not the uninterrupted run's bytes"
before=$(stat -c '%n %y' "$work/cpart"/*)
expect_ok "$TARNN" "${C[@]}" -o "$work/cp.png" --out-dir "$work/cpart" --resume
expect_eq "$(cat "$work/out")" "$work/cpart: already complete (6 completions): nothing completed; the grid drawn from them -> $work/cp.png" "complete --resume of a finished run"
expect_eq "$(stat -c '%n %y' "$work/cpart"/*)" "$before" "complete's finished PNGs after --resume"
cmp -s "$work/cw.png" "$work/cp.png" && ok || bad "complete --resume of a finished run: another grid"
# at --temperature 0.7 its record holds the temperature: a resume at another one (1, the default,
# which a record leaves out) is refused and touches nothing; at 0.7 it gives the uninterrupted
# run's bytes, with no -o. A run stopped before its first completion leaves no folder it made
# (OutputFolder) and says there is nothing to resume
T=(complete --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" --index 0-2 --samples 2 --seed 5 --batch 2 --threads 1)
expect_ok "$TARNN" "${T[@]}" --temperature 0.7 --out-dir "$work/tw" --quiet
interrupted_after 4 "$TARNN" "${T[@]}" --temperature 0.7 --out-dir "$work/tp"
[ $rc -eq 130 ] && grep -q '"temperature": 0.7' "$work/tp/.tarnn-complete.json" && ok || bad "complete at T = 0.7 interrupted: exit $rc, record $(cat "$work/tp/.tarnn-complete.json")"
before=$(stat -c '%n %y %s' "$work/tp"/* "$work/tp/.tarnn-complete.json")
expect_error "tp/.tarnn-complete.json: was written by another run (temperature differs)" "$TARNN" "${T[@]}" --out-dir "$work/tp" --resume
expect_eq "$(stat -c '%n %y %s' "$work/tp"/* "$work/tp/.tarnn-complete.json")" "$before" "a resume at another temperature: the outputs"
expect_ok "$TARNN" "${T[@]}" --temperature 0.7 --out-dir "$work/tp" --resume --json --quiet
$PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(not (j['resumed_at'] == 4 and j['temperature'] == 0.7))" && ok || bad "complete --resume at T = 0.7: $(cat "$work/out")"
diff -r "$work/tw" "$work/tp" >/dev/null && ok || bad "complete --resume at T = 0.7: not the uninterrupted run's bytes"
interrupted_after 0 "$TARNN" "${T[@]}" --temperature 0.7 --out-dir "$work/t0"
expect_eq "$rc $(tail -1 "$work/err")" "130 tarnn: interrupted (signal 2) after 0 of 6 completions: nothing written" "complete interrupted before its first completion"
[ ! -e "$work/t0" ] && ok || bad "complete interrupted before its first completion left its --out-dir"
interrupted_after 0 "$TARNN" sample --model "$SMALL" -n 4 --out-dir "$work/s0" --npy "$work/s0.npy"
expect_eq "$rc $(tail -1 "$work/err")" "130 tarnn: interrupted (signal 2) after 0 of 4 images: nothing written" "sample interrupted before its first image"
expect_eq "$(ls -A "$work" | grep -c '^s0')" 0 "what a sample interrupted before its first image left"
expect_error "TARNN_TEST_INTERRUPT_AFTER must be N or N:TERM" env TARNN_TEST_INTERRUPT_AFTER=soon "$TARNN" sample --model "$SMALL" -n 2 --out-dir "$work/x"
echo '{"model": "x", "done": 1}' >"$work/r.npy.partial.json"
expect_error "written by another run" "$TARNN" sample --model "$SMALL" -n 8 --seed 1 --npy "$work/r.npy" --resume
expect_error "a grid alone is not resumable" "$TARNN" sample --model "$SMALL" -n 8 -o "$work/g.png" --resume
expect_error "a grid is a PNG" "$TARNN" sample --model "$SMALL" -n 8 -o "$work/g.jpg"
expect_error "must end in .npy" "$TARNN" sample --model "$SMALL" -n 8 --npy "$work/g.bin"

# --- grids: --nrow (alias --cols), --padding, --pad-value, --scale: torchvision's layout, scaled
# (tests/python checks that tarnn.grid gives the same bytes; tests/io the layout itself)
G=(sample --model "$SMALL" -n 6 --seed 3) # images of 5 x 4
expect_ok "$TARNN" "${G[@]}" -o "$work/g1.png" --nrow 4 --padding 1 --scale 3
expect_eq "$(png_size "$work/g1.png")" "$(((4 * 4 + 5) * 3))x$(((2 * 5 + 3) * 3))" "--nrow 4 --padding 1 --scale 3"
expect_ok "$TARNN" "${G[@]}" -o "$work/g2.png" --cols 4 --padding 1 --scale 3
cmp -s "$work/g1.png" "$work/g2.png" && ok || bad "--cols is not --nrow"
expect_ok "$TARNN" "${G[@]}" -o "$work/g3.png" --nrow 4 --padding 1 --scale 3 --pad-value 200
cmp -s "$work/g1.png" "$work/g3.png" && bad "--pad-value changed nothing" || ok
expect_ok "$TARNN" "${G[@]}" -o "$work/g4.png" # 3 x 2 of 5 x 4, 2 apart: 20 x 16, drawn at 8
expect_eq "$(png_size "$work/g4.png")" "160x128" "the default grid"
for flag in "--nrow -1" "--padding 65" "--pad-value 256" "--scale 17"; do
  # shellcheck disable=SC2086
  expect_error "${flag% *} must be in" "$TARNN" "${G[@]}" -o "$work/bad.png" $flag
done
expect_error "a smaller scale" "$TARNN" sample --model "$SMALL" -n 65536 -o "$work/bad.png" --scale 16

# --- shards: N contiguous ranges, merged, are one run, byte for byte
expect_ok "$TARNN" sample --model "$SMALL" -n 1000 --seed 4 --first 7 --npy "$work/one.npy" --quiet
for k in 0 1 2; do
  expect_ok "$TARNN" sample --model "$SMALL" -n 1000 --seed 4 --first 7 --shard $k/3 --npy "$work/shard-$k.npy" --quiet
done
expect_ok $PY "$SRC/tools/merge_npy.py" "$work/merged.npy" "$work"/shard-{0,1,2}.npy
cmp -s "$work/one.npy" "$work/merged.npy" && ok || bad "3 shards merged differ from one run"
expect_error "--shard must be K/N" "$TARNN" sample --model "$SMALL" -n 10 --shard 3/3 --npy "$work/x.npy"
expect_error "holds no image" "$TARNN" sample --model "$SMALL" -n 2 --shard 0/3 --npy "$work/x.npy"
# the GNU parallel recipe of docs/SCALE.md, where parallel is installed
if command -v parallel >/dev/null; then
  expect_ok parallel --will-cite -j 2 "$TARNN" sample --model "$SMALL" -n 1000 --seed 4 --first 7 --shard {}/4 --npy "$work/p-{}.npy" --quiet ::: 0 1 2 3
  expect_ok $PY "$SRC/tools/merge_npy.py" "$work/p.npy" "$work"/p-{0,1,2,3}.npy
  cmp -s "$work/one.npy" "$work/p.npy" && ok || bad "GNU parallel shards merged differ from one run"
else
  echo "GNU parallel recipe skipped: no parallel here"
fi

# --- score reads folders, several files and patterns; errors name the path
expect_ok "$TARNN" sample --model "$SMALL" -n 5 --seed 2 --out-dir "$work/five" --npy "$work/five.npy" --quiet
expect_ok "$TARNN" score --model "$SMALL" --images "$work/five" --json
folder=$($PY -c "import json; print(json.load(open('$work/out'))['bits_per_dim'])")
expect_ok "$TARNN" score --model "$SMALL" --images "$work/five.npy" --json
whole=$($PY -c "import json; print(json.load(open('$work/out'))['bits_per_dim'])")
expect_eq "$folder" "$whole" "a folder of PNGs scores as the .npy of the same images"
expect_ok "$TARNN" score --model "$SMALL" --images "$work/five/*.png" "$work/five.npy" --json
$PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(not (j['images'] == 10 and len(j['files']) == 6))" && ok || bad "a pattern and a file"
expect_error "no file matches" "$TARNN" score --model "$SMALL" --images "$work/none/*.png"

# --- --json on every command: JSON on stdout, nothing else there; --json-file the same
for cmd in "sample --model $SMALL -n 2 --out-dir $work/j" "score --model $SMALL --images $SMALL/inputs-idx-ubyte" \
           "complete --model $SMALL --images $SMALL/inputs-idx-ubyte -o $work/j.png" "info --model $SMALL" \
           "bench --model $SMALL --batch 2 --steps 2"; do
  # shellcheck disable=SC2086
  "$TARNN" $cmd --json --json-file "$work/j.json" >"$work/out" 2>"$work/err" || bad "$cmd --json failed: $(cat "$work/err")"
  $PY -c "
import json, sys
j = json.load(open('$work/out'))
sys.exit(not (j['schema_version'] == 3 and j['tarnn_version'] and j['time'] and json.load(open('$work/j.json')) == j))" && ok || bad "$cmd --json: $(head -c 300 "$work/out")"
done

# --- progress: tqdm's bar on a terminal (tests/cli/frictions_test.sh: its figures); nothing with
# --quiet
script -qec "$TARNN sample --model $MNIST -n 4 --batch 2 --threads 1 --out-dir $work/pr" /dev/null >"$work/tty" 2>&1
grep -qE "100%\|(█){10}\| 4/4 \[[0-9.]+ s, [0-9.]+ images/s\]" "$work/tty" && ok || bad "no progress bar: $(tr '\r' '\n' <"$work/tty" | tail -3)"
script -qec "$TARNN sample --model $MNIST -n 2 --quiet --out-dir $work/pq" /dev/null >"$work/tty" 2>&1
grep -qE "ETA|%\|" "$work/tty" && bad "--quiet drew progress" || ok

# --- names: "1 image"; a model found by name where it is installed (tests/install)
expect_ok "$TARNN" sample --model "$SMALL" -n 1 --out-dir "$work/one"
grep -q "^1 image in" "$work/out" && ok || bad "'1 image': $(cat "$work/out")"
expect_error "no model folder (config.json + model.safetensors) in ./no-such-model" "$TARNN" info --model no-such-model

finish
