#!/usr/bin/env bash
# tools/check_functions.py on the tree (no Python, C++ or CUDA function outside the tests over 80
# lines, at most a handful over 60, each with its reason), and on a made-up tree with one function
# of each kind it must report and one of each kind it must let pass.
# usage: functions_test.sh PYTHON SOURCE_DIR
TARNN_PYTHON=$1 SRC=$2 TARNN=unused
source "$SRC/tests/cli/cli_lib.sh"
if "$PY" "$SRC/tools/check_functions.py" "$SRC"; then ok; else bad "long functions in the tree"; fi
# def NAME LINES [COMMENT]: a function of LINES lines, COMMENT the line just above it
def() {
  [ -z "${3:-}" ] || echo "# $3"
  echo "def $1():"
  for ((i = 1; i < $2; i++)); do echo "    x = $i"; done
  echo
}
# cdef NAME LINES [COMMENT] [HEAD]: a C++ function of LINES lines from its name to its brace,
# COMMENT above it and HEAD (a template line) between them
cdef() {
  [ -z "${3:-}" ] || echo "// $3"
  [ -z "${4:-}" ] || echo "$4"
  echo "void $1() {"
  for ((i = 2; i < $2; i++)); do echo "  int x$i = $i;"; done
  echo "}"
}
mkdir -p "$work/tools/gpu" "$work/tests/tools" "$work/build/x" "$work/.git" "$work/src/m" \
  "$work/kernels"
{ def long 81; def long_reasoned 81 "Over 60 lines: a reason does not excuse 80"
  def sixty_one 61; def sixty 60; } >"$work/tools/a.py"
reason="Over 60 lines: one job, read top to bottom"
{ for n in 1 2 3 4 5; do def "reasoned_$n" 61 "$reason"; done
  printf 'def documented():\n    """Over 60 lines:\n    in the docstring."""\n'
  for ((i = 4; i <= 61; i++)); do echo "    x = $i"; done; } >"$work/tools/gpu/b.py"
{ printf 'class C:\n'; def method 81 | sed 's/^/    /'; } >"$work/c.py"
for skipped in tests/tools build/x .git; do def "skipped" 200 >"$work/$skipped/d.py"; done
{ cdef cpp_long 81; cdef cpp_sixty_one 61; cdef cpp_sixty 60; } >"$work/src/m/e.cpp"
cdef cu_reasoned 70 "$reason" "template <int D>" >"$work/kernels/f.cu"
cdef cpp_skipped 200 >"$work/tests/tools/g.cpp"
out=$("$PY" "$SRC/tools/check_functions.py" "$work")
expect_eq $? 1 "the exit status for a tree with long functions"
for want in "tools/a.py:1: long is 81 lines, over 80" \
            "tools/a.py:84: long_reasoned is 81 lines, over 80" \
            "tools/a.py:166: sixty_one is 61 lines, over 60 with no" "c.py:2: method is 81 lines" \
            "10 functions over 60 lines, more than a handful (5)" "src/m/e.cpp:1: cpp_long is 81" \
            "src/m/e.cpp:82: cpp_sixty_one is 61 lines, over 60 with no" "7 violations"; do
  if grep -qF "$want" <<<"$out"; then ok; else bad "not reported: $want"; fi
done
for fine in " sixty " reasoned_ documented skipped ": cpp_sixty is" cu_reasoned; do
  if grep -qF "$fine" <<<"$out"; then bad "reported, though allowed: $fine"; else ok; fi
done
[ $fail -eq 0 ] || echo "$out"
finish
