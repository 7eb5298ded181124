#!/usr/bin/env bash
# tools/check_layers.py on the tree (no include points up, no numerics compared as strings below
# the engine), and on a made-up tree with one violation of each kind, which it must report.
set -u
PY=$1 SRC=$2
fail=0
"$PY" "$SRC/tools/check_layers.py" "$SRC" || fail=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/model" "$work/src/cpu" "$work/src/cuda" "$work/include/tarnn"
echo '#include "../cpu/cpu_ops.h"' >"$work/src/model/forward.h"       # up a layer
echo '#include "../cpu/gemm.h"' >"$work/src/cuda/twin.h"               # a peer backend
echo 'bool b(const std::string &p) { return p == "bf16"; }' >"$work/src/cpu/x.cpp"
echo '#include "../../src/model/forward.h"' >"$work/include/tarnn/api.h" # public -> private
# a new backend's folder, in no list: a backend by its place, a peer of the others
mkdir -p "$work/src/metal"
echo '#include "../cpu/cpu_ops.h"' >"$work/src/metal/metal_ops.h"
touch "$work/src/cpu/cpu_ops.h" "$work/src/cpu/gemm.h"
out=$("$PY" "$SRC/tools/check_layers.py" "$work")
rc=$?
for want in "a higher layer" "src/cuda includes src/cpu/gemm.h, a peer" "compared as a string" \
            "a public header includes" "src/metal includes src/cpu/cpu_ops.h, a peer" \
            "5 violations"; do
  grep -q "$want" <<<"$out" || { echo "FAIL: not reported: $want"; fail=1; }
done
[ $rc -eq 1 ] || { echo "FAIL: exit $rc for a tree with violations"; fail=1; }
[ $fail -eq 0 ] && echo "layers: ok"
exit $fail
