#!/usr/bin/env bash
# Installs what is missing (Debian packages), builds, then runs the job named by $1:
#   tools/setup.sh sample   64 digits from the shipped model -> samples.png
#   tools/setup.sh test     every test: the release build's suite, then the same suite built by
#                           clang with AddressSanitizer and UndefinedBehaviorSanitizer, with the
#                           parsers fuzzed 20 s each and the GPU suite run on the emulated device
#                           (what .ci/run calls; tools/fuzz.sh: longer)
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:-}
# Each phase's time on one line (CI's budget is 20 minutes; where it goes is the first question)
phase_start=$SECONDS
phase() { echo "setup.sh: $1 took $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }
case "$job" in
  sample | test) ;;
  *) echo "usage: tools/setup.sh sample|test" >&2; exit 2 ;;
esac

# Debian's python3-torch is the PyTorch reference's; it lives under /usr/bin/python3, not the
# python3 that may come first on PATH.
packages=(cmake g++ make nlohmann-json3-dev libstb-dev libcli11-dev libgtest-dev binutils
          libcpp-httplib-dev)
[ "$job" = test ] && packages+=(python3-torch libopenblas0-pthread python3-numpy python3-matplotlib clang libclang-rt-14-dev
                                pybind11-dev python3-dev python3-pytest parallel slurm-wlm munge
                                python3-pil chromium python3-pip python3-setuptools
                                universal-ctags) # ctags: tools/check_functions.py's C++
# tarnn serve's browser test: node and npm (from Debian where the machine has none of its own)
[ "$job" = test ] && ! command -v npm >/dev/null && packages+=(nodejs npm)
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

phase "installing"
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
phase "the release build"

if [ "$job" = sample ]; then
  ./build/tarnn sample --model models/mnist -n 64 --seed 1 -o samples.png
  exit 0
fi

# playwright-core for tarnn serve's browser test (tests/serve/package-lock.json; the browser is
# Debian's chromium); without the registry the test says it is skipped
npm ci --prefix tests/serve --no-audit --no-fund --loglevel=error ||
  echo "setup.sh: npm ci failed: the browser test will be skipped" >&2

ctest --test-dir build --output-on-failure -j"$jobs"
phase "the release tests"

# The sanitizers, with clang so that the same build holds the libFuzzer harnesses: the C++ suites,
# the command end to end and the fuzzers (the pure-Python tests and the install check gain nothing
# from them and are left to the release pass, as are the README's commands, which the cli suites
# cover: under ASan they took 11 of CI's 20 minutes; and the browser test, whose page is
# JavaScript: the API and load tests run the instrumented server; the check of the CMake option
# helper, which compiles nothing, of the docs' figures and of the functions' lengths, Python;
# the GPU runbook's dry run, plan and weights' way home, shell and Python; the trainer's modes,
# PyTorch; the state format's
# comparison with the PyTorch reference, whose C++ test_state runs instrumented). The goldens made
# with torch are the release pass's (-FS: not made again). Its CUDA backend is the emulated
# device's (docs/CUDA.md): the same kernels and backend on the CPU, so the GPU suite runs here,
# instrumented, where the release pass (nvcc's build, no GPU) skips it.
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DTARNN_FUZZ=ON -DTARNN_CUDA_EMULATOR=ON -DTARNN_GOLDEN_DIR="$PWD/build"
cmake --build build-sanitize -j"$jobs"
phase "the sanitizer build"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure -j"$jobs" -FS '^golden_(mnist|maps)' \
  -E '^(reference|training|train_modes|install|readme|serve_browser|cmake_option|figures|functions|lease_.*|state_reference|make_golden_.*)$'
phase "the sanitizer tests"
