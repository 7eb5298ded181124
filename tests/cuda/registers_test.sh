#!/usr/bin/env bash
# The attention kernels' register budget, checked at build time where nvcc exists (no GPU needed):
# compiled for sm_80 and sm_90 as the build compiles them (--fmad=false), every kernel of
# kernels/*.cu spills nothing, and the step kernels (linear_attention_kernel and, with the state's
# write deferred, chunked_attention_kernel: 256 threads a block) keep to the 64 registers of 4
# blocks per SM in every state format (__launch_bounds__(256, 4)).
# Device code only (-cubin): the host half is the build's, and skipping it makes this 3x faster.
#   registers_test.sh NVCC SOURCE_DIR
set -u
NVCC=${1:-} SRC=$2
if [ -z "$NVCC" ] || [ ! -x "$NVCC" ]; then
  echo "registers: skipped: no nvcc (the CUDA backend is not built here)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
for arch in sm_80 sm_90; do
  for cu in "$SRC"/kernels/*.cu; do
    if ! "$NVCC" -std=c++17 -arch=$arch --fmad=false -Xptxas -v -I "$SRC/include" -I "$SRC/kernels" \
      -cubin "$cu" -o "$work/k.cubin" >"$work/ptxas.txt" 2>&1; then
      echo "FAIL: $cu does not compile for $arch:"; tail -5 "$work/ptxas.txt"; fail=1; continue
    fi
    # one line per kernel: name, registers, spill bytes
    awk -v arch=$arch -v file="$(basename "$cu")" '
      /Compiling entry function/ { match($0, /'"'"'[^'"'"']*'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
      /bytes spill stores/ { spill = $5 + 0 }
      /Used [0-9]+ registers/ { for (i = 1; i <= NF; ++i) if ($i == "Used") regs = $(i + 1); print arch, file, name, regs, spill }
    ' "$work/ptxas.txt" >>"$work/kernels.txt"
  done
done
while read -r arch file name regs spill; do
  pretty=$(echo "$name" | c++filt | sed -E 's/\((float|tarnn::QkvIn).*//; s/\(tarnn::StateFormat\)/format /g')
  line="$arch $pretty: $regs registers, $spill bytes spilled"
  if [ "$spill" -ne 0 ]; then echo "FAIL: $line"; fail=1
  elif [[ "$pretty" == linear_attention_kernel* || "$pretty" == chunked_attention_kernel* ]] && [ "$regs" -gt 64 ]; then echo "FAIL: $line (budget 64)"; fail=1
  else echo "ok   $line"; fi
done <"$work/kernels.txt"
[ -s "$work/kernels.txt" ] || { echo "FAIL: no kernel found in ptxas's output"; fail=1; }
exit $fail
