#!/usr/bin/env bash
# Every tool in tools/ parses its arguments before its heavy imports: --help works under a Python
# without numpy, torch or matplotlib (here the configured one with -S: no site-packages, which is
# where Debian keeps them; a pyenv python3 on PATH is such a Python too).
# usage: help_test.sh PYTHON SOURCE_DIR
PY=$1
SRC=$2
pass=0
fail=0
if "$PY" -S -c "import numpy" 2>/dev/null; then
  echo "FAIL: $PY -S imports numpy: this test cannot show a Python without it"
  exit 1
fi
for tool in $(grep -l '^if __name__ == "__main__":' "$SRC"/tools/*.py "$SRC"/tools/*/*.py); do
  if "$PY" -S "$tool" --help >"${TMPDIR:-/tmp}/help.$$" 2>&1 && head -1 "${TMPDIR:-/tmp}/help.$$" | grep -q "^usage: "; then
    pass=$((pass + 1))
  else
    echo "FAIL: ${tool#"$SRC"/} --help without numpy or torch: $(tail -1 "${TMPDIR:-/tmp}/help.$$")"
    fail=$((fail + 1))
  fi
done
rm -f "${TMPDIR:-/tmp}/help.$$"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -ge 10 ]
