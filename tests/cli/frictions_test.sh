#!/usr/bin/env bash
# What a first user tripped on (issue 37), each as a check: --model given a file, complete's
# outputs, --keep-rows' default in the help, what an .npy error says, "1 thread", the progress bar
# on a terminal and its last line beside the summary, and --temperature's refusals and record.
# The small model only, and Python without numpy (a pseudo-terminal from its pty module).
# usage: frictions_test.sh TARNN SOURCE_DIR
TARNN=$1
SRC=$2
source "$(dirname "$0")/cli_lib.sh"
IDX=$SMALL/inputs-idx-ubyte
NO=$work/no-such-model

# --- --model names the folder, not a file in it: the error says to pass the folder
expect_error "a file, not a model folder: pass the folder that holds config.json and model.safetensors ($SMALL)" \
  "$TARNN" info --model "$SMALL/model.safetensors"

# --- complete writes what it is asked for: -o, --out-dir, --json or --json-file, any of them
expect_ok "$TARNN" complete --model "$SMALL" --images "$IDX" --index 0 --samples 2 --out-dir "$work/cd" --quiet
expect_eq "$(ls "$work/cd" | wc -l)" 2 "complete --out-dir without -o: its files"
expect_ok "$TARNN" complete --model "$SMALL" --images "$IDX" --index 0-1 --json --quiet
$PY -c "import json, sys; j = json.load(open('$work/out')); sys.exit(not (j['index'] == [0, 1] and j['outputs']['grid'] == ''))" &&
  ok || bad "complete --json without -o: $(head -c 300 "$work/out")"
expect_usage "name an output: -o GRID.png, --out-dir FOLDER, --json or --json-file FILE" \
  "$TARNN" complete --model "$NO" --images "$IDX"

# --- --keep-rows' help: no "=0" beside a default that is the top half; 0 said to keep nothing
"$TARNN" complete --help >"$work/h"
grep -qE -- "--keep(-rows)? INT=" "$work/h" && bad "--keep-rows/--keep show a default of 0: $(grep -A1 -- --keep "$work/h")" || ok
tr -s ' \n' ' ' <"$work/h" | grep -qF "without --keep-rows, --keep or --mask: the top half" && ok ||
  bad "--keep-rows' help: $(grep -A2 -- --keep-rows "$work/h")"
tr -s ' \n' ' ' <"$work/h" | grep -qF "0 keeps none (plain sampling)" && ok || bad "--keep-rows 0 in the help"

# --- an .npy the engine cannot read says what it holds and what is wanted (as Python's errors)
$PY - "$work" <<'PY'
import struct, sys, zipfile
def npy(path, descr, shape, data):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    d += " " * ((64 - (10 + len(d) + 1) % 64) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode() + data)
w = sys.argv[1]
npy(f"{w}/nchw.npy", "|u1", "(3, 2, 5, 4)", bytes(120))  # the small model's images, channels first
npy(f"{w}/f32.npy", "<f4", "(3, 5, 4, 2)", bytes(480))
with zipfile.ZipFile(f"{w}/z.npz", "w") as z:
    z.writestr("arr_0.npy", open(f"{w}/nchw.npy", "rb").read())
PY
expect_error "holds (3, 2, 5, 4): channels first (NCHW, PyTorch's layout); the model wants NHWC (n, 5, 4, 2): save numpy.transpose(x, (0, 2, 3, 1))" \
  "$TARNN" score --model "$SMALL" --images "$work/nchw.npy"
expect_error "holds float32 ('<f4'), not uint8 image bytes: for floats in [0, 1], save (x * 255).round().astype(numpy.uint8)" \
  "$TARNN" score --model "$SMALL" --images "$work/f32.npy"
expect_error "z.npz: a .npz (a zip of arrays, numpy.savez) is not read: save one array with numpy.save as .npy" \
  "$TARNN" score --model "$SMALL" --images "$work/z.npz"

# --- "1 thread", not "1 threads", wherever the count is written
expect_ok "$TARNN" sample --model "$SMALL" -n 2 --threads 1 --out-dir "$work/t1" --json --quiet
$PY -c "import json, sys; d = json.load(open('$work/out'))['device_name']; sys.exit(not (', 1 thread,' in d or d.endswith(', 1 thread')))" &&
  ok || bad "device_name with one thread: $(grep device_name "$work/out")"
expect_ok "$TARNN" bench --model "$SMALL" --batch 2 --steps 2 --threads 1
grep -q "1 threads" "$work/out" && bad "bench says 1 threads: $(grep '1 threads' "$work/out")" || ok

# --- the shipped model's card, in the layout of model hubs: a YAML header with the licence, the
# data set and the metric, then what it is for, what it cannot do and whose data it learnt from
$PY - "$SRC/models/mnist/MODEL_CARD.md" <<'PY' && ok || bad "models/mnist/MODEL_CARD.md"
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
head = re.match(r"---\n(.*?)\n---\n", text, re.S)
assert head, "no YAML header"
fields = dict(re.findall(r"^(\w+):[ ]*(.*)$", head.group(1), re.M))
assert fields.get("license") == "mit", fields
for key, item in (("datasets", "mnist"), ("metrics", "bits_per_dim")):
    assert re.search(rf"^{key}:\n(- .*\n)*- {item}$", head.group(1) + "\n", re.M) or \
        re.search(rf"^{key}:\n(- .*\n)*- {item}\n", head.group(1) + "\n", re.M), key
for section in ("## Model details", "## Intended use", "## Limitations", "## Licence", "## Data",
                "## Training", "## Figures"):
    assert "\n" + section + "\n" in text, section
assert "CC BY-SA 3.0" in text and "MIT" in text
PY

# --- progress: on a terminal tqdm's bar, whose last line says the summary's seconds and rate as
# the summary rounds them (one clock); in a file, lines without \r, the last one the same figures
# (the last lines are written at the end: on a terminal always, in a file after a job of at least
# TARNN_PROGRESS_SECONDS, here a microsecond)
$PY - "$TARNN" "$SMALL" "$work" >"$work/pty" 2>&1 <<'PY'
import os, pty, re, subprocess, sys
tarnn, small, work = sys.argv[1:]
cmd = [tarnn, "sample", "--model", small, "-n", "3", "--out-dir", f"{work}/bar"]
main, sub = pty.openpty()  # stderr a terminal, stdout a pipe
run = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=sub, text=True)
os.close(sub)
err = b""
while True:
    try:
        chunk = os.read(main, 4096)
    except OSError:  # the terminal's other end is closed: all read
        break
    if not chunk:
        break
    err += chunk
err = err.decode()
last = err.replace("\r\n", "\n").split("\r")[-1].strip()
bar = re.fullmatch(r"100%\|█{10}\| 3/3 \[([0-9.]+) s, ([0-9.]+) images/s\]", last)
summary = re.match(r"3 images in ([0-9.]+) s \(([0-9.]+) images/s\)", run.stdout)
problems = []
if run.returncode or not bar or not summary:
    problems.append(f"the bar's last line {last!r}, the summary {run.stdout!r}")
elif bar.groups() != summary.groups():
    problems.append(f"the bar says {bar.groups()}, the summary {summary.groups()}")
run = subprocess.run(cmd[:-1] + [f"{work}/log"], capture_output=True,
                     env=dict(os.environ, TARNN_PROGRESS_SECONDS="0.000001"))
run.stdout, run.stderr = run.stdout.decode(), run.stderr.decode()  # bytes: a \r is kept
lines = run.stderr.splitlines() or [""]
line = re.fullmatch(r"3/3 images  ([0-9.]+) images/s  in ([0-9.]+) s", lines[-1])
summary = re.match(r"3 images in ([0-9.]+) s \(([0-9.]+) images/s\)", run.stdout)
if "\r" in run.stderr or not line or not summary or line.groups()[::-1] != summary.groups():
    problems.append(f"in a file: {run.stderr!r}, the summary {run.stdout!r}")
sys.exit("; ".join(problems) or None)
PY
[ $? -eq 0 ] && ok || bad "progress: $(cat "$work/pty")"

finish
