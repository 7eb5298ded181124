#!/usr/bin/env bash
# tarnn_option (tools/cmake/tarnn_option.cmake), the switch of the CUDA backend, serve and the
# Python module: a value it chose follows what is found at the next configure (pybind11 installed
# after a first configure without it turns the module on), a value given with -D stays.
# usage: option_test.sh SOURCE_DIR
SRC=$1
TARNN=unused
source "$SRC/tests/cli/cli_lib.sh"
cat >"$work/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(option_test NONE)
include($SRC/tools/cmake/tarnn_option.cmake)
tarnn_option(X "x" HAVE)
message(STATUS "X=\${X}")
CMAKE
x() { # the value of X after a configure with these -D arguments
  cmake -S "$work" -B "$work/b" "$@" 2>&1 | sed -n 's/^-- X=//p'
}
expect_eq "$(x -DHAVE=OFF)" OFF "not found"
expect_eq "$(x -DHAVE=ON)" ON "found at the second configure"
expect_eq "$(x -DHAVE=OFF)" OFF "gone again"
expect_eq "$(x -DX=ON)" ON "-DX=ON without it"
expect_eq "$(x -DHAVE=OFF)" ON "-DX=ON kept"
rm -rf "$work/b"
expect_eq "$(x -DHAVE=ON -DX=OFF)" OFF "-DX=OFF with it"
expect_eq "$(x -DHAVE=ON)" OFF "-DX=OFF kept"
finish
