#!/usr/bin/env bash
# pip install . into a fresh virtual environment, as docs/PYTHON.md says, offline and without
# build isolation (setup.py reuses this build folder: seconds, not a second build), then import
# tarnn from outside the tree: the venv's module, its stubs, an installed model by its name and the
# command's bytes (docs/PYTHON.md's examples, which need nothing more of a route: test_docs.py).
# usage: venv_test.sh BUILD_DIR SOURCE_DIR TARNN PYTHON
BUILD=$1
SRC=$2
TARNN=$3
PYTHON=$4
source "$SRC/tests/cli/cli_lib.sh"
unset PYTHONPATH # the venv's own module, not the build tree's
if ! "$PYTHON" -c "import importlib.util as u; assert all(map(u.find_spec, ['pip', 'setuptools', 'venv']))" 2>/dev/null; then
  echo "python_venv: skipped: $PYTHON has no pip, setuptools or venv (apt-get install python3-pip python3-setuptools python3-venv)"
  exit 77
fi
# the system's pip and numpy, seen through --system-site-packages: no index, no download
expect_ok "$PYTHON" -m venv --without-pip --system-site-packages "$work/venv"
TARNN_CMAKE_BUILD_DIR=$BUILD "$work/venv/bin/python" -m pip install --no-build-isolation \
  --no-index --no-cache-dir --quiet "$SRC" >"$work/pip.log" 2>&1 && ok || bad "pip install: $(tail -5 "$work/pip.log")"
expect_ok "$TARNN" sample --model "$SMALL" -n 4 --seed 1 -o "$work/cmd.png" --scale 1
cd "$work" || exit 1
"$work/venv/bin/python" - "$work" "$SMALL" >"$work/out" 2>&1 <<'PY' && ok || bad "the installed module: $(tail -5 "$work/out")"
import os, pathlib, sys
import tarnn
work, small = sys.argv[1], sys.argv[2]
site = os.path.dirname(tarnn.__file__)
assert site.startswith(os.path.join(work, "venv")), tarnn.__file__
assert os.path.isfile(os.path.join(site, "tarnn.pyi"))
m = tarnn.Model("mnist")  # the package's models, PREFIX/share/tarnn/models, as --model mnist
assert "venv/share/tarnn/models/mnist" in repr(m), repr(m)
a = tarnn.Model(pathlib.Path(small)).sample(4, seed=1)
tarnn.write_png(pathlib.Path(work) / "py.png", tarnn.grid(a, 2, scale=1))
PY
cmp -s "$work/py.png" "$work/cmd.png" && ok || bad "the venv's images differ from the command's"
finish
