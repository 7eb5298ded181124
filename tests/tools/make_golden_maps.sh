#!/usr/bin/env bash
# The goldens of the small test model with each feature map but elu + 1 (docs/SPEC.md section 1,
# "Feature maps"): weights and omega from a seed, and the float64 PyTorch reference's mixture
# parameters and bits/dim of 3 images (tools/random_model.py --golden), one folder per map.
#   make_golden_maps.sh PYTHON SOURCE_DIR OUT
set -euo pipefail
py=$1 src=$2 out=$3
mkdir -p "$out"
# d_head 6: F = 10 (random_fourier), 7 (smoothed), 12 (favor), 9 (generalized): S not square
for spec in relu \
  'random_fourier|{"kind": "random_fourier", "n_dims": 10}' \
  'smoothed_random_fourier|{"kind": "smoothed_random_fourier", "n_dims": 8, "smoothing": 0.5}' \
  'favor|{"kind": "favor", "n_dims": 12, "softmax_temp": 0.2}' \
  'generalized_random|{"kind": "generalized_random", "n_dims": 9, "kernel_fn": "elu+1"}'; do
  name=${spec%%|*} map=${spec#*|}
  "$py" "$src/tools/random_model.py" --config small --seed 3 --golden 3 --feature-map "$map" \
    --out "$out/$name" >/dev/null
done
echo "make_golden_maps: $(ls "$out" | wc -l) models in $out"
