#!/usr/bin/env bash
# One convention across the commands: usage errors exit 2, in one form, before any model is loaded;
# a mistyped command or flag gets the closest known name; output names in any case; every
# command's JSON carries the run's numerics as fields; one set of defaults (seed, completions).
# usage: usage_test.sh TARNN SOURCE_DIR
TARNN=$1
SRC=$2
source "$(dirname "$0")/cli_lib.sh"
IDX=$SMALL/inputs-idx-ubyte

# --- usage errors: exit 2 before any model is loaded. The model folder does not exist: a command
# that loaded it before checking its flags would say "cannot open" and exit 1.
NO=$work/no-such-model
X=$work/x.png
expect_usage "--precision fp16: not a precision" "$TARNN" sample --model "$NO" --precision fp16 -o "$X"
expect_usage "--precision tf32 runs on cuda only" "$TARNN" score --model "$NO" --images "$IDX" --precision tf32
expect_usage "--state fp8: not a state format" "$TARNN" complete --model "$NO" --images "$IDX" --state fp8 -o "$X"
expect_usage "--device tpu is not available" "$TARNN" bench --model "$NO" --device tpu
expect_usage "--tf32 and --precision bf16 disagree" "$TARNN" sample --model "$NO" --tf32 --precision bf16 -o "$X"
expect_usage "--batch must be in [0, 4194304]" "$TARNN" score --model "$NO" --images "$IDX" --batch -1
expect_usage "--shard must be K/N with 0 <= K < N (got 2/2)" "$TARNN" sample --model "$NO" -n 10 --shard 2/2 --npy "$work/x.npy"
expect_usage "--shard 0/3 holds no image of 2" "$TARNN" sample --model "$NO" -n 2 --shard 0/3 --npy "$work/x.npy"
expect_usage "-o $work/x.jpg: must end in .png (any case); a grid is a PNG" "$TARNN" sample --model "$NO" -o "$work/x.jpg"
expect_usage "--npy $work/x.bin: must end in .npy" "$TARNN" sample --model "$NO" --npy "$work/x.bin"
expect_usage "name an output" "$TARNN" sample --model "$NO"
expect_usage "a grid alone is not resumable" "$TARNN" sample --model "$NO" -o "$X" --resume
expect_usage "-o $work/c.jpg: must end in .png" "$TARNN" complete --model "$NO" --images "$IDX" -o "$work/c.jpg"
expect_usage "--keep-rows must be at least 0 (got -3)" "$TARNN" complete --model "$NO" --images "$IDX" --keep-rows -3 -o "$X"
expect_usage "--keep must be at least 0 (got -1)" "$TARNN" complete --model "$NO" --images "$IDX" --keep -1 -o "$X"
expect_usage "--index: range '3-1' runs backwards" "$TARNN" complete --model "$NO" --images "$IDX" --index 3-1 -o "$X"
expect_usage "is not an index or a range" "$TARNN" complete --model "$NO" --images "$IDX" --index 0-a -o "$X"
expect_usage "10000 images x 11 samples is over 100000 completions" "$TARNN" complete --model "$NO" --images "$IDX" --index 0-9999 --samples 11 -o "$X"
expect_usage "-n must be in [1, 100000]" "$TARNN" bench --model "$NO" -n 0
expect_usage "--device cuda runs linear attention only" "$TARNN" bench --model "$NO" --device cuda --attention softmax
if "$TARNN" --help | grep -q "^  serve"; then # built with cpp-httplib
  expect_usage "--precision fp16" "$TARNN" serve --model "$NO" --precision fp16 --port 0
fi
# what needs the model or the file is checked once they are read, and is a usage error too
expect_usage "--keep-rows must be in [0, 5] (got 30)" "$TARNN" complete --model "$SMALL" --images "$IDX" --keep-rows 30 -o "$X"
expect_usage "nothing to complete" "$TARNN" complete --model "$SMALL" --images "$IDX" --keep 40 -o "$X"
expect_usage "out of range: the file holds" "$TARNN" complete --model "$SMALL" --images "$IDX" --index 0-99 -o "$X"
[ -e "$X" ] && bad "a usage error left an output file" || ok
# other errors: exit 1, "tarnn: error: ..."
error_1() { # CMD...: exit 1, one line "tarnn: error: ..."
  "$@" >/dev/null 2>"$work/err"
  expect_eq "$? $(wc -l <"$work/err") $(cut -c1-13 "$work/err")" "1 1 tarnn: error:" "$*: $(cat "$work/err")"
}
error_1 "$TARNN" sample --model "$NO" -o "$X"
error_1 "$TARNN" complete --model "$SMALL" --images "$IDX" --mask "$work/missing.png" -o "$X"

# --- did you mean: the closest known command or flag
expect_usage "unknown command 'sampel' (did you mean sample?)" "$TARNN" sampel -n 2
expect_usage "unknown command 'frobnicate' (commands: sample, score, info, complete, bench" "$TARNN" frobnicate
expect_usage "unknown flag --modle (did you mean --model?) (see tarnn sample --help)" "$TARNN" sample --modle "$SMALL" -o "$X"
expect_usage "unknown flag --imagse (did you mean --images?)" "$TARNN" score --imagse "$IDX"
expect_usage "unknown flag --sed (did you mean --seed?)" "$TARNN" complete --images "$IDX" -o "$X" --sed=3
expect_usage "unknown flag --frobnicate (see tarnn info --help)" "$TARNN" info --frobnicate
grep -q "did you mean" "$work/err" && bad "a far-off flag got a suggestion: $(cat "$work/err")" || ok

# --- output names in any case: g.PNG is a PNG, a.NPY a .npy, the same bytes as in lower case
expect_ok "$TARNN" sample --model "$SMALL" -n 3 --scale 1 -o "$work/g.PNG" --npy "$work/a.NPY"
expect_ok "$TARNN" sample --model "$SMALL" -n 3 --scale 1 -o "$work/g.png" --npy "$work/a.npy"
cmp -s "$work/g.PNG" "$work/g.png" && cmp -s "$work/a.NPY" "$work/a.npy" && ok || bad "upper-case names: other bytes"
expect_ok "$TARNN" complete --model "$SMALL" --images "$IDX" --index 0 -o "$work/c.Png"
[ -s "$work/c.Png" ] && ok || bad "complete -o c.Png wrote nothing"

# --- the help shows each flag as it is typed; bench counts images with -n (--images: files)
"$TARNN" sample --help >"$work/h"
grep -qE -- "--no-prefill +feed" "$work/h" && ! grep -q "{false}" "$work/h" && ok || bad "--no-prefill in help: $(grep prefill "$work/h")"
"$TARNN" bench --help >"$work/h"
grep -qE -- "^ +-n INT" "$work/h" && ! grep -q -- "--images" "$work/h" && ok || bad "bench --help: $(grep -E -- '-n|images' "$work/h")"
for flag in -n --images; do # the older spelling stays, hidden
  expect_ok "$TARNN" bench --model "$SMALL" --complete $flag 2 --samples 3 --batch 6 --threads 1 --json
  $PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(j['complete']['images'] != 2)" && ok || bad "bench $flag 2"
done

# --- every command's JSON: the run's device, precision, state and threads as fields (numbers as
# numbers), with the values the run used; what each command adds (docs/JSON.md)
fields() { # JSON_FILE PYTHON_CONDITION...: the common fields, then the command's own
  $PY - "$@" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
common = {"schema_version": 3, "device": "cpu", "precision": "bf16", "state": "fp32", "threads": 2,
          "threads_from": "--threads"}
wrong = {k: j.get(k) for k, v in common.items() if j.get(k) != v or type(j.get(k)) is not type(v)}
wrong.update({c: "false" for c in sys.argv[2:] if not eval(c, {"j": j})})
assert not wrong, f"{sys.argv[1]}: {wrong}"
PYEOF
}
R=(--precision bf16 --threads 2 --json-file "$work/j.json")
expect_ok "$TARNN" sample --model "$SMALL" -n 2 --out-dir "$work/s" "${R[@]}"
fields "$work/j.json" "j['images'] == 2 and j['seed'] == 0 and j['first'] == 0 and j['warnings'] == []" \
  "j['device_name'].startswith('cpu')" && ok || bad "sample JSON"
expect_ok "$TARNN" score --model "$SMALL" --images "$IDX" "${R[@]}"
fields "$work/j.json" "j['images'] == len(j['per_image']) > 0 and j['bits_per_dim'] > 0" \
  "j['warnings'] == []" && ok || bad "score JSON"
expect_ok "$TARNN" complete --model "$SMALL" --images "$IDX" --index 0-1 -o "$X" "${R[@]}"
fields "$work/j.json" "j['known_bytes'] == 16 and j['bytes_per_image'] == 40" \
  "j['index'] == [0, 1] and j['samples'] == 4 and j['seed'] == 0 and j['warnings'] == []" \
  && ok || bad "complete JSON"
expect_ok "$TARNN" bench --model "$SMALL" --batch 2 --steps 2 "${R[@]}"
fields "$work/j.json" "j['batch'] == 2 and j['machine']['threads'] == 2" && ok || bad "bench JSON"
expect_ok "$TARNN" bench --model "$SMALL" --complete -n 2 --samples 1 "${R[@]}"
fields "$work/j.json" "j['complete']['completions_per_second'] > 0" && ok || bad "bench --complete JSON"
expect_ok "$TARNN" info --model "$SMALL" --json
$PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(not (j['schema_version'] == 3 and j['parameters'] > 0))" && ok || bad "info JSON"
expect_ok "$TARNN" info --model "$SMALL" --device cpu --json # and the device a run would use
$PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(not (j['device'] == 'cpu' and j['device_name'].startswith('cpu')))" && ok || bad "info --device JSON"
fields "$work/j.json" "j['device_name'].startswith('cpu')" && ok || bad "bench JSON's device_name"
# every core is the cores this process may use: one under taskset, said where it came from, and
# "1 thread" in words; the JSON names the source (docs/JSON.md)
if command -v taskset >/dev/null; then
  one=$(taskset -pc $$ | sed 's/.*: //; s/[,-].*//') # the first core this shell may use
  expect_ok taskset -c "$one" "$TARNN" bench --model "$SMALL" --steps 2 --batch 8 --json
  $PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(not (j['threads'] == 1 and j['threads_from'] == 'affinity' and j['machine']['threads'] == 1))" \
    && ok || bad "bench under taskset -c $one: $(grep threads "$work/out")"
  expect_ok taskset -c "$one" "$TARNN" bench --model "$SMALL" --steps 2 --batch 8
  grep -q ", 1 thread, " "$work/out" && ok || bad "one thread in words: $(head -1 "$work/out")"
  expect_ok taskset -c "$one" "$TARNN" sample --model "$SMALL" -n 2 --out-dir "$work/t1" --json
  $PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(not (j['threads'] == 1 and j['threads_from'] == 'affinity' and ', 1 thread,' in j['device_name']))" \
    && ok || bad "sample under taskset -c $one: $(grep threads "$work/out")"
else
  echo "taskset checks skipped: no taskset here"
fi

# --- one set of defaults (tarnn/jobs.h): seed 0 and 4 completions per image, as Python's and the
# server's (tests/python, tests/serve check theirs against these)
expect_ok "$TARNN" complete --model "$SMALL" --images "$IDX" --index 0 -o "$work/d1.png" --out-dir "$work/d1"
expect_eq "$(ls "$work/d1" | wc -l)" 4 "completions per image by default"
expect_ok "$TARNN" complete --model "$SMALL" --images "$IDX" --index 0 -o "$work/d2.png" --samples 4 --seed 0
cmp -s "$work/d1.png" "$work/d2.png" && ok || bad "complete's defaults are not --samples 4 --seed 0"
expect_ok "$TARNN" sample --model "$SMALL" -n 3 --npy "$work/s1.npy"
expect_ok "$TARNN" sample --model "$SMALL" -n 3 --npy "$work/s2.npy" --seed 0
cmp -s "$work/s1.npy" "$work/s2.npy" && ok || bad "sample's default seed is not 0"

finish
