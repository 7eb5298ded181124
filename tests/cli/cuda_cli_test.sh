#!/usr/bin/env bash
# tarnn --device cuda end to end. With a GPU: it samples, scores and benchmarks. On the emulated
# device (-DTARNN_CUDA_EMULATOR=ON) the same, and every device name says "emulated", and bench
# counts the bytes each kernel moves. Without a device (or without a CUDA build): each command is
# one line on stderr naming why, a non-zero exit, and no output file; those checks pass, then the
# script exits 77 and ctest reports it skipped.
# usage: cuda_cli_test.sh TARNN SOURCE_DIR
TARNN=$1
SRC=$2
source "$(dirname "$0")/cli_lib.sh"

"$TARNN" sample --device cuda --model "$SMALL" -n 4 --seed 3 -o "$work/g.png" >"$work/out" 2>"$work/err"
rc=$?
if [ $rc -eq 0 ]; then
  echo "a CUDA device is present: $(cat "$work/out")"
  [ -s "$work/g.png" ] && ok || bad "sample --device cuda wrote no PNG"
  "$TARNN" score --device cuda --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" >"$work/s" 2>&1 && ok || bad "score --device cuda: $(cat "$work/s")"
  "$TARNN" bench --device cuda --model "$SMALL" --batch 8 --steps 3 --json-file "$work/b.json" >"$work/b" 2>&1 && ok || bad "bench --device cuda: $(cat "$work/b")"
  grep -q images_per_second "$work/b.json" 2>/dev/null && ok || bad "bench --device cuda JSON"
  # --precision int8 (cuBLASLt's int8 GEMMs): scored within 1e-4 bits/dim of the CPU's int8, and benchmarked
  "$TARNN" score --device cuda --precision int8 --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" --json >"$work/s8g" 2>&1 &&
    "$TARNN" score --precision int8 --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" --json >"$work/s8c" 2>&1 &&
    "$PY" -c "import json,sys; g,c=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(not abs(g['bits_per_dim']-c['bits_per_dim'])<=1e-4)" "$work/s8g" "$work/s8c" &&
    ok || bad "score --device cuda --precision int8: $(cat "$work/s8g")"
  "$TARNN" bench --device cuda --precision int8 --model "$SMALL" --batch 8 --steps 3 >"$work/b8" 2>&1 && ok || bad "bench --device cuda --precision int8: $(cat "$work/b8")"
  if grep -q emulated "$work/b"; then # the emulated device never passes for a GPU
    json() { "$PY" -c "import json,sys; j=json.load(open('$1')); sys.exit(not ($2))"; }
    json "$work/b.json" "'emulated' in j['device_name'] and 'emulated' in j['machine']['gpu'] and \
j['emulated_bytes_per_image_step'] > j['emulated_state_bytes_per_image_step'] > 0 and \
j['emulated_kernels'][0]['launches_per_step'] > 0" && ok || bad "bench's JSON on the emulated device"
    grep -q "emulated device: .* bytes per image-step" "$work/b" && ok || bad "bench's text: $(cat "$work/b")"
    "$TARNN" sample --device cuda --model "$SMALL" -n 2 --quiet -o "$work/s.png" --json >"$work/s.json" &&
      json "$work/s.json" "'emulated' in j['device_name']" && ok || bad "sample's JSON"
    "$TARNN" info --device cuda --model "$SMALL" --json >"$work/i.json" 2>&1 &&
      json "$work/i.json" "'emulated' in j['device_name']" && ok || bad "info's JSON"
    "$TARNN" info --device cuda --model "$SMALL" | grep -q "^device .*emulated" && ok || bad "info"
    # bf16 GEMMs' inputs written by their kernels, or rounded by passes (TARNN_BF16_INPUTS=rounded):
    # fewer rounding passes counted the first way; another value is a one-line error
    for path in written rounded; do
      TARNN_BF16_INPUTS=${path#written} "$TARNN" bench --device cuda --model "$SMALL" --batch 4 \
        --steps 2 --precision bf16 --quiet --json-file "$work/b-$path.json" >/dev/null 2>&1 || bad "bench, bf16 $path"
    done
    rounds() { "$PY" -c "import json; print(sum(k['launches_per_step'] for k in json.load(open('$1'))['emulated_kernels'] if k['name'] == 'round_bf16_kernel'))"; }
    [ "$(rounds "$work/b-written.json")" = 3.0 ] && [ "$(rounds "$work/b-rounded.json")" = 9.0 ] && ok ||
      bad "rounding passes: $(rounds "$work/b-written.json") written, $(rounds "$work/b-rounded.json") rounded"
    TARNN_BF16_INPUTS=fp32 "$TARNN" bench --device cuda --model "$SMALL" --batch 4 --steps 2 \
      --precision bf16 >"$work/out" 2>"$work/err"
    [ $? -ne 0 ] && [ "$(wc -l <"$work/err")" -eq 1 ] &&
      grep -qF "TARNN_BF16_INPUTS=fp32: not a path for bf16 GEMMs' inputs (rounded; unset: the engine's)" "$work/err" &&
      ok || bad "TARNN_BF16_INPUTS=fp32: $(cat "$work/err")"
    # q, k and v written in bf16 by their GEMM (the engine's), or in fp32 (TARNN_BF16_OUTPUTS=fp32):
    # half the bytes written the first way; another value is a one-line error on either device
    TARNN_BF16_OUTPUTS=fp32 "$TARNN" bench --device cuda --model "$SMALL" --batch 4 --steps 2 \
      --precision bf16 --quiet --json-file "$work/b-qkv32.json" >/dev/null 2>&1 || bad "bench, TARNN_BF16_OUTPUTS=fp32"
    qkv() { "$PY" -c "import json; print([k['written_bytes_per_image_step'] for k in json.load(open('$1'))['emulated_kernels'] if k['name'].startswith('gemm 16->54 ')])"; }
    [ "$(qkv "$work/b-written.json")" = "[216.0]" ] && [ "$(qkv "$work/b-qkv32.json")" = "[432.0]" ] && ok ||
      bad "q, k, v bytes written: $(qkv "$work/b-written.json") in bf16, $(qkv "$work/b-qkv32.json") in fp32"
    for device in cuda cpu; do
      TARNN_BF16_OUTPUTS=bf16 "$TARNN" bench --device $device --model "$SMALL" --batch 4 --steps 2 \
        --precision bf16 >"$work/out" 2>"$work/err"
      [ $? -ne 0 ] && [ "$(wc -l <"$work/err")" -eq 1 ] &&
        grep -qF "TARNN_BF16_OUTPUTS=bf16: not a path for bf16 GEMMs' outputs (fp32; unset: the engine's)" "$work/err" &&
        ok || bad "TARNN_BF16_OUTPUTS=bf16 on $device: $(cat "$work/err")"
    done
    TARNN_GEMM=fast "$TARNN" bench --device cuda --model "$SMALL" --batch 4 --steps 2 >"$work/out" 2>"$work/err"
    [ $? -ne 0 ] && [ "$(wc -l <"$work/err")" -eq 1 ] &&
      grep -qF "TARNN_GEMM=fast: not a GEMM path (cublas, unfused; unset: the engine's)" "$work/err" &&
      ok || bad "TARNN_GEMM=fast: $(cat "$work/err")"
    # the LayerNorms a row once, the final norm in the last layer's second, or a pass each
    # (TARNN_LAYERNORM=passes); another value is a one-line error
    TARNN_LAYERNORM=passes "$TARNN" bench --device cuda --model "$SMALL" --batch 4 --steps 2 \
      --quiet --json-file "$work/b-passes.json" >/dev/null 2>&1 || bad "bench, TARNN_LAYERNORM=passes"
    norms() { "$PY" -c "import json; print(sum(k['launches_per_step'] for k in json.load(open('$1'))['emulated_kernels'] if 'layernorm' in k['name']))"; }
    [ "$(norms "$work/b-written.json")" = 4.0 ] && [ "$(norms "$work/b-passes.json")" = 5.0 ] && ok ||
      bad "LayerNorm launches: $(norms "$work/b-written.json") by rows, $(norms "$work/b-passes.json") by passes"
    TARNN_LAYERNORM=fused "$TARNN" bench --device cuda --model "$SMALL" --batch 4 --steps 2 >"$work/out" 2>"$work/err"
    [ $? -ne 0 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "TARNN_LAYERNORM=fused: not a LayerNorm path" "$work/err" &&
      ok || bad "TARNN_LAYERNORM=fused: $(cat "$work/err")"
    # the feed-forward block fused (TARNN_FEED_FORWARD=fused, bf16 GEMMs) or all after the attention
    # (=layer): another value, another precision or a model it cannot take (the small golden's
    # d_ff 24) is a one-line error
    for bad_ff in "TARNN_FEED_FORWARD=on:--precision bf16:TARNN_FEED_FORWARD=on: not a feed-forward path (fused, layer; unset: the engine's)" \
      "TARNN_FEED_FORWARD=layer:--precision fp32:TARNN_FEED_FORWARD=layer: the layer's kernel runs bf16 GEMMs (--precision bf16); this run's are fp32" \
      "TARNN_FEED_FORWARD=layer:--precision bf16:TARNN_FEED_FORWARD=layer: the layer's kernel needs d_model and d_ff multiples of 16 (the tensor cores' tiles); this model's are 16 and 24" \
      "TARNN_FEED_FORWARD=fused:--precision fp32:TARNN_FEED_FORWARD=fused: the fused feed-forward runs bf16 GEMMs (--precision bf16); this run's are fp32" \
      "TARNN_FEED_FORWARD=fused:--precision bf16:TARNN_FEED_FORWARD=fused: the fused feed-forward needs d_model and d_ff multiples of 16 (the tensor cores' tiles); this model's are 16 and 24"; do
      IFS=: read -r setting flags want <<<"$bad_ff"
      # shellcheck disable=SC2086
      env "$setting" "$TARNN" bench --device cuda --model "$SMALL" --batch 4 --steps 2 $flags >"$work/out" 2>"$work/err"
      [ $? -ne 0 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -qF "$want" "$work/err" &&
        ok || bad "$setting $flags: $(cat "$work/err")"
    done
  fi
else
  reason=$(cat "$work/err")
  echo "no CUDA run here: $reason"
  [ "$(wc -l <"$work/err")" -eq 1 ] && ok || bad "stderr is not one line: $reason"
  case "$reason" in
    *"no CUDA device"* | *"not available in this build"*) ok ;;
    *) bad "unexpected error: $reason" ;;
  esac
  [ -e "$work/g.png" ] && bad "a failed run left an output file" || ok
  for cmd in "score --images $SMALL/inputs-idx-ubyte" "bench --batch 4 --steps 2"; do
    # shellcheck disable=SC2086
    "$TARNN" $cmd --device cuda --model "$SMALL" >"$work/out" 2>"$work/err"
    [ $? -ne 0 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -qE "no CUDA device|not available in this build" "$work/err" && ok || bad "$cmd --device cuda: $(cat "$work/err")"
  done
fi
finish || exit 1
[ $rc -eq 0 ] || exit 77 # the GPU runs did not happen: skipped
