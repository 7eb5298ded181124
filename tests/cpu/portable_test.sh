#!/usr/bin/env bash
# The release binary runs on any x86-64: AVX-512 (zmm) and AVX (ymm) instructions appear only in
# the kernels chosen at run time (functions named *_avx512, *_avx_vnni and *_avx2), and each such
# kernel is present. usage: portable_test.sh BINARY
BIN=$1
command -v objdump >/dev/null || { echo "skipped: no objdump (binutils)"; exit 77; }
fail=0
funcs=$(objdump -d --no-show-raw-insn -C "$BIN" |
  awk '/^[0-9a-f]+ <.*>:$/ {fn=$0; next} /%[yz]mm/ {if (!(fn in seen)) {seen[fn]=1; print fn}}')
stray=$(printf '%s\n' "$funcs" | grep -v -E 'avx512|avx_vnni|avx2' | grep -v '^$')
if [ -n "$stray" ]; then
  echo "FAIL: vector instructions outside the dispatched kernels:"
  printf '%s\n' "$stray"
  fail=1
fi
for want in 'tile_avx512<8>' 'tile_avx2<8>' 'tile_avx512_vnni<8>' 'tile_avx_vnni<8>' 'attention_avx512' 'attention_avx2' 'layernorm_rows_avx512' 'attend_avx512' 'attend_avx2'; do
  printf '%s\n' "$funcs" | grep -qF "$want" || { echo "FAIL: no $want with vector instructions"; fail=1; }
done
echo "$(printf '%s\n' "$funcs" | grep -c .) functions with AVX/AVX-512 instructions, all dispatched"
exit $fail
