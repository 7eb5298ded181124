#!/usr/bin/env bash
# Installs what is missing (Debian packages), builds, then runs the job named by $1:
#   tools/setup.sh sample   64 digits from the shipped model -> samples.png
#   tools/setup.sh test     every test (what .ci/run calls)
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:-}
case "$job" in
  sample | test) ;;
  *) echo "usage: tools/setup.sh sample|test" >&2; exit 2 ;;
esac

# Debian's python3-torch is the PyTorch reference's; it lives under /usr/bin/python3, not the
# python3 that may come first on PATH.
packages=(cmake g++ make nlohmann-json3-dev libstb-dev libcli11-dev libgtest-dev
          python3-torch python3-numpy python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"

if [ "$job" = sample ]; then
  ./build/tarnn sample --model models/mnist -n 64 --seed 1 -o samples.png
else
  ctest --test-dir build --output-on-failure
fi
