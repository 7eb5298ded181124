#!/usr/bin/env bash
# tools/check_figures.py on the tree (every measured figure in the README, docs/ and the model
# cards has a recorded run behind it), and on a made-up tree with one figure of each kind it must
# report and one of each kind it must let pass.
# usage: figures_test.sh PYTHON SOURCE_DIR
TARNN_PYTHON=$1 SRC=$2 TARNN=unused
source "$SRC/tests/cli/cli_lib.sh"
if "$PY" "$SRC/tools/check_figures.py" "$SRC"; then ok; else bad "figures without a recorded run"; fi
mkdir -p "$work/docs" "$work/models/m" "$work/src" "$work/tools/bench/runs"
cat >"$work/README.md" <<'EOF'
# A readme

| command | images/s, median (min-max) |
| --- | --- |
| `build/tarnn bench --shape mnist` | 23.01 (22.93-23.64) |

Now fp32 31.37 images/s ([docs/RESULTS.md](docs/RESULTS.md)).

It scores 1.046 bits/dim ([its card](models/m/MODEL_CARD.md)); at most about 7,900 images/s
(derived: 3.35 TB/s over 423 MB an image). A line every 10 seconds. The paper: 142.8 images/s.

Now fp32 31.36 images/s ([docs/RESULTS.md](docs/RESULTS.md)).

Once 12.89 images/s (`tools/bench/runs/a.json`: a run, but not the document that records it).
EOF
cat >"$work/docs/RESULTS.md" <<'EOF'
# Results

## Now

`build/tarnn bench --shape mnist` gives 31.36 images/s.

## Every run

`tools/plot_bench.py --table-only tools/bench/runs/*.json`:

| model | images/s | GFLOP/s (of peak) | file |
| --- | ---: | --- | --- |
| m | 12.5 | 100.0 (50% of 200) | a.json |
EOF
echo '{"images_per_second": 12.89, "gflops_achieved": 100.0}' >"$work/tools/bench/runs/a.json"
printf '# The state\n\n## Speed\n\nThe fp16 state: 57.35 images/s.\n' >"$work/docs/STATE.md"
printf '| what | bits/dim | command |\n| --- | --- | --- |\n| test | 1.046137 | `tarnn score` |\n' \
  >"$work/models/m/MODEL_CARD.md"
cat >"$work/src/x.cpp" <<'EOF'
// With this, the bench went from 30.5 to 43 images/s.
int a;
// This made it faster (docs/RESULTS.md: 31.36 images/s).
int b;
//    24/64 images  7.90 images/s  ETA 0:00:05
EOF
out=$("$PY" "$SRC/tools/check_figures.py" "$work")
expect_eq $? 1 "the exit status for a tree with unrecorded figures"
for want in "README.md:5: 23.01 images/s" "README.md:5: 22.93 images/s" \
            "README.md:5: 23.64 images/s" "README.md:7: 31.37 images/s" \
            "docs/RESULTS.md:13: images/s 12.5, but a.json holds 12.89" \
            "README.md:14: 12.89 images/s" "docs/STATE.md:5: 57.35 images/s" \
            "src/x.cpp:1: 43 images/s" "8 figure(s)"; do
  if grep -qF "$want" <<<"$out"; then ok; else bad "not reported: $want"; fi
done
for fine in 1.046 7,900 "423 MB" "3.35 TB/s" "10 seconds" 142.8 "README.md:12" "x.cpp:3" \
            "x.cpp:5"; do
  if grep -qF "$fine" <<<"$out"; then bad "reported, though recorded: $fine"; else ok; fi
done
[ $fail -eq 0 ] || echo "$out"
finish
