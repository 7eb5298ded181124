#!/usr/bin/env bash
# What the command reads, writes and says, end to end (issue 42): every output path follows a link
# to the file it names and writes a device, a FIFO or /dev/stdout into (never replacing it); names
# of any length; a run that finishes nothing leaves nothing; an fp16 state beyond what was measured
# is said; inputs that are not regular files (a FIFO as config.json) are refused, not waited on; a
# model too large for this machine is refused before it is read; a config.json that says one thing
# twice is refused. The small model; numpy only.
# usage: files_test.sh TARNN SOURCE_DIR
TARNN=$1
SRC=$2
source "$(dirname "$0")/cli_lib.sh"
S=(--model "$SMALL" -n 3 --seed 4 --quiet)
expect_ok "$TARNN" sample "${S[@]}" --scale 1 -o "$work/want.png" --npy "$work/want.npy"
kind() { stat -c %F "$1"; } # "regular file", "symbolic link", "fifo", "character special file"

# --- links: followed through a chain (relative ones from their folder), the file they name written,
# the links kept
mkdir -p "$work/real" "$work/sub"
ln -s chain.png "$work/grid.png" && ln -s sub/../real/grid.png "$work/chain.png"
ln -s real/a.npy "$work/a.npy" && ln -s real/j.json "$work/j.json"
expect_ok "$TARNN" sample "${S[@]}" --scale 1 -o "$work/grid.png" --npy "$work/a.npy" --json-file "$work/j.json"
cmp -s "$work/real/grid.png" "$work/want.png" && cmp -s "$work/real/a.npy" "$work/want.npy" && ok || bad "through links: other bytes"
expect_eq "$(kind "$work/grid.png") $(kind "$work/chain.png") $(kind "$work/a.npy") $(kind "$work/j.json")" \
  "symbolic link symbolic link symbolic link symbolic link" "the links after writing through them"
grep -q '"command": "sample"' "$work/real/j.json" && ok || bad "--json-file through a link: $(cat "$work/real/j.json")"
expect_eq "$(ls -A "$work" "$work/real" | grep -c -e '\.partial' -e '\.tmp-')" 0 "temporaries or partials left"

# --- streams: written into, never replaced. /dev/stdout is a link to /proc/self/fd/1: here one of
# our own to the command's stdout, a pipe
ln -s /proc/self/fd/1 "$work/stdout"
"$TARNN" info --model "$SMALL" --json-file "$work/stdout" >"$work/out" 2>"$work/err"
expect_eq "$? $(kind "$work/stdout")" "0 symbolic link" "--json-file onto a link to stdout"
$PY -c "import json,sys; t=open('$work/out').read(); j=json.loads(t[t.index('\n{\n'):]); sys.exit(j['command'] != 'info')" \
  && ok || bad "--json-file onto stdout: no JSON on stdout: $(head -c 300 "$work/out")"
# a FIFO, read by cat at its own pace (release_fifo ends a cat that the run never wrote to)
mkfifo "$work/fifo.json" "$work/fifo.npy" "$work/fifo.png"
for f in json npy png; do read_fifo "$work/fifo.$f" "$work/from-fifo.$f"; done
expect_ok "$TARNN" sample "${S[@]}" --scale 1 -o "$work/fifo.png" --npy "$work/fifo.npy" --json-file "$work/fifo.json"
for f in json npy png; do release_fifo "$work/fifo.$f"; done
wait
cmp -s "$work/from-fifo.png" "$work/want.png" && cmp -s "$work/from-fifo.npy" "$work/want.npy" && ok || bad "through FIFOs: other bytes"
grep -q '"command": "sample"' "$work/from-fifo.json" && ok || bad "--json-file into a FIFO: $(cat "$work/from-fifo.json")"
expect_eq "$(kind "$work/fifo.json") $(kind "$work/fifo.npy") $(kind "$work/fifo.png")" "fifo fifo fifo" "FIFOs after writing into them"
expect_error "not a file (a device, a FIFO or a descriptor): a run writing into it cannot be resumed" \
  "$TARNN" sample "${S[@]}" --npy "$work/fifo.npy" --resume
# a FIFO is a stream: an interrupted run says what went into it, and that it keeps no record
read_fifo "$work/fifo.npy" "$work/from-fifo.npy"
TARNN_TEST_INTERRUPT_AFTER=2 "$TARNN" sample "${S[@]}" --batch 1 --npy "$work/fifo.npy" >/dev/null 2>"$work/err"
expect_eq "$? $(cat "$work/err")" "130 tarnn: interrupted (signal 2): 2 of 3 images written into $work/fifo.npy, a stream (not resumable)" "a run into a FIFO interrupted"
release_fifo "$work/fifo.npy"
wait
# a character device of our own (/dev/null's numbers), where this user may make one
if mknod "$work/null" c 1 3 2>/dev/null; then
  expect_ok "$TARNN" score --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" --json-file "$work/null"
  expect_eq "$(kind "$work/null")" "character special file" "--json-file onto a device"
fi

# --- a run through a link is resumed, refused and started over there: its partial and record are
# beside the file the link leads to, the link kept (--overwrite through a link; --resume through it
# of an interrupted run, then of a finished one)
L=(sample --model "$SMALL" -n 8 --seed 6 --batch 2 --threads 1 --quiet)
expect_ok "$TARNN" "${L[@]}" --npy "$work/lwant.npy"
ln -s real/l.npy "$work/l.npy"
for restart in --overwrite --resume; do
  TARNN_TEST_INTERRUPT_AFTER=4 "$TARNN" "${L[@]}" --npy "$work/l.npy" >/dev/null 2>"$work/err"
  expect_eq "$? $(ls -A "$work/real" | grep '^l\.' | tr '\n' ' ')" "130 l.npy.partial l.npy.partial.json " "interrupted through a link (then $restart)"
  expect_error "$work/l.npy: an interrupted run wrote 4 of 8 images there (its record: $work/real/l.npy.partial.json): --resume goes on from there, --overwrite starts over" \
    "$TARNN" "${L[@]}" --npy "$work/l.npy"
  expect_ok "$TARNN" "${L[@]}" --npy "$work/l.npy" $restart --json
  $PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(j['resumed_at'] != (4 if '$restart' == '--resume' else 0))" && ok || bad "$restart through a link: $(cat "$work/out")"
  cmp -s "$work/real/l.npy" "$work/lwant.npy" && ok || bad "$restart through a link: other bytes"
  expect_eq "$(kind "$work/l.npy") $(ls -A "$work/real" | grep '^l\.' | tr '\n' ' ')" "symbolic link l.npy " "$restart through a link: what is left"
  rm "$work/real/l.npy"
done
expect_ok "$TARNN" "${L[@]}" --npy "$work/l.npy"
expect_ok "$TARNN" "${L[@]}" --npy "$work/l.npy" --resume
expect_eq "$(cat "$work/out")" "$work/l.npy: already complete (8 images): nothing sampled" "--resume through a link of a finished run"

# --- names of 244 to 255 bytes: their temporaries, partial and record fit (a 244-byte --npy
# computed every image, then failed); a name too long for any file is refused before any work
name() { printf "$work/%s.$2" "$(printf 'n%.0s' $(seq $(($1 - 1 - ${#2}))))"; } # LENGTH EXT
for length in 244 250 255; do
  expect_ok "$TARNN" sample "${S[@]}" --npy "$(name $length npy)" --json-file "$(name $length json)" \
    -o "$(name $length png)"
  cmp -s "$(name $length npy)" "$work/want.npy" && ok || bad "--npy with a $length-byte name: other bytes"
done
long=$work/$(printf 'x%.0s' $(seq 252)).npy
expect_error "its name is 256 bytes, longer than the 255 a name may have" "$TARNN" sample "${S[@]}" --npy "$long"

# --- a run that finishes nothing leaves nothing: a model whose fp16 state overflows fails at its
# first image (the partial .npy was left with its header, the --out-dir empty)
$PY "$SRC/tests/cli/scale_weights.py" "$SMALL" "$work/hot" "(query|key|value)_projection.weight" 500
expect_error "overflowed" "$TARNN" sample --model "$work/hot" -n 3 --state fp16 --npy "$work/o.npy" --out-dir "$work/od"
expect_eq "$(ls "$work" | grep -c -e '^o\.npy' -e '^od$')" 0 "what a failed run left"
grep -qF "try --state fp32" "$work/err" && ok || bad "the fp16 overflow does not point to --state fp32: $(cat "$work/err")"
# --- an fp16 state beyond the magnitudes it was measured for (large weights) is said, once, on
# stderr and in the JSON (its bits/dim moved with no word); fp32 has nothing to say
$PY "$SRC/tests/cli/scale_weights.py" "$SMALL" "$work/warm" "(query|key|value)_projection.weight" 30
for state in fp16 fp32; do
  "$TARNN" score --model "$work/warm" --images "$SMALL/inputs-idx-ubyte" --state $state \
    --json-file "$work/w-$state.json" >"$work/out" 2>"$work/err"
  echo "$? $(grep -c "^tarnn: warning: --state fp16: this model's state reached |S| = " "$work/err")" >"$work/said-$state"
  $PY -c "import json; w=json.load(open('$work/w-$state.json'))['warnings']; print(len(w), all('(docs/STATE.md)' in x for x in w))" >>"$work/said-$state"
done
expect_eq "$(cat "$work/said-fp16" | tr '\n' ' ')" "0 1 1 True " "fp16 beyond its measured range: said once"
expect_eq "$(cat "$work/said-fp32" | tr '\n' ' ')" "0 0 0 True " "fp32: nothing said"
# --out-dir where no file can be made (as root, access() says /proc is writable)
expect_error "/proc: not a writable folder" "$TARNN" sample "${S[@]}" --out-dir /proc
expect_error "/proc: not a writable folder" "$TARNN" complete --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" --index 0 -o "$work/c.png" --out-dir /proc

# --- inputs that are not regular files are refused before they are opened (a FIFO as config.json
# or model.safetensors waited in open for ever). A writer stands ready with the real file, so a
# tarnn that opened the FIFO would read it and load, and fail this check rather than hang it
for f in config.json model.safetensors; do
  mkdir -p "$work/fifo-$f" && cp "$SMALL"/* "$work/fifo-$f/" && rm "$work/fifo-$f/$f" && mkfifo "$work/fifo-$f/$f"
  write_fifo "$work/fifo-$f/$f" "$SMALL/$f"
  expect_error "$work/fifo-$f/$f: not a regular file (a FIFO)" "$TARNN" info --model "$work/fifo-$f"
  release_fifo "$work/fifo-$f/$f"
  wait
done

# --- a model larger than this machine's memory is refused before its weights are read, with
# advice that fits (it said "try a smaller --batch" for info); config.json alone says its size
mkdir -p "$work/huge" && cp "$SMALL/model.safetensors" "$work/huge/"
$PY - "$SMALL/config.json" "$work/huge/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(n_layers=256, n_heads=64, d_head=256, d_model=16384, d_ff=65536) # 3.4e12 parameters
json.dump(c, open(sys.argv[2], "w"))
PYEOF
for cmd in info "score --images $SMALL/inputs-idx-ubyte"; do
  expect_error "loading the model ($work/huge: 824690843657 parameters as fp32) needs" "$TARNN" $cmd --model "$work/huge"
  grep -q -e "--batch" -e "--threads" "$work/err" && bad "$cmd: advice for another command: $(cat "$work/err")" || ok
done

# --- a config.json that says one thing twice is refused, naming the key
mkdir -p "$work/twice" && cp "$SMALL"/* "$work/twice/"
sed 's/"n_layers": 2,/"n_layers": 2, "n_layers": 1,/' "$SMALL/config.json" >"$work/twice/config.json"
expect_error "config.json: \"n_layers\" is given twice" "$TARNN" info --model "$work/twice"

finish
