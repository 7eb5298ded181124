#!/usr/bin/env bash
# cmake --install, then a project outside the tree finds the package (find_package(tarnn)),
# builds against it and samples: the same bytes as the installed command.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
BUILD=$1
SRC=$2
TARNN=unused
source "$SRC/tests/cli/cli_lib.sh"
prefix=$work/prefix
expect_ok cmake --install "$BUILD" --prefix "$prefix"
for f in bin/tarnn include/tarnn/tarnn.h include/tarnn/run.h lib/libtarnn.a \
         lib/cmake/tarnn/tarnnConfig.cmake share/tarnn/models/mnist/config.json; do
  [ -e "$prefix/$f" ] && ok || bad "not installed: $f"
done
expect_ok "$prefix/bin/tarnn" --version
# an installed model by its name, from any folder
(cd / && "$prefix/bin/tarnn" info --model mnist) >"$work/out" 2>"$work/err" && grep -q "share/tarnn/models/mnist" "$work/out" && ok || bad "--model mnist from /: $(cat "$work/err")"
expect_ok cmake -S "$SRC/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release
expect_ok cmake --build "$work/consumer"
expect_ok "$work/consumer/consumer" "$SMALL" "$work/lib.png"
expect_ok "$prefix/bin/tarnn" sample --model "$SMALL" -n 4 --seed 1 -o "$work/cmd.png" --scale 1
cmp -s "$work/lib.png" "$work/cmd.png" && ok || bad "the library's images differ from the command's"
# the Python module, where this build has it: where Debian's python3 looks under the prefix; it
# finds the installed models by their name, as the installed command does
if [ -e "$BUILD/python/tarnn.pyi" ]; then
  site=$(ls -d "$prefix"/lib/python3.*/dist-packages 2>/dev/null | head -1)
  [ -n "$site" ] && ls "$site"/tarnn*.so >/dev/null 2>&1 && [ -e "$site/tarnn.pyi" ] && ok || bad "the Python module is not installed"
  expect_ok env PYTHONPATH="$site" "${TARNN_PYTHON:-/usr/bin/python3}" -c "
import tarnn, sys
assert '$prefix/share/tarnn/models/mnist' in repr(tarnn.Model('mnist')), 'not the installed model'
a = tarnn.Model('$SMALL').sample(4, seed=1)
tarnn.write_png('$work/py.png', tarnn.grid(a, 2, scale=1))"
  cmp -s "$work/py.png" "$work/cmd.png" && ok || bad "the installed module's images differ from the command's"
fi
finish
