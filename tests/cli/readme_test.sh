#!/usr/bin/env bash
# README.md's commands can be pasted as they are: every `build/tarnn` line of its Use section and
# its Python example run here, from a folder laid out as the repository (build, models, tools,
# and data where it was made). Lines that read data/mnist are skipped, and said so, without it.
# usage: readme_test.sh BUILD_DIR SOURCE_DIR
BUILD=$1
SRC=$2
TARNN=unused
source "$SRC/tests/cli/cli_lib.sh"
cd "$work" || exit 1
ln -s "$BUILD" build
ln -s "$SRC/models" models
ln -s "$SRC/tools" tools
[ -d "$SRC/data" ] && ln -s "$SRC/data" data
skipped=0
while IFS= read -r line; do
  if [[ $line == *data/mnist* ]] && [ ! -d data/mnist ]; then
    skipped=$((skipped + 1))
    continue
  fi
  if bash -c "$line" >"$work/out" 2>"$work/err"; then ok; else bad "README line failed: $line: $(tail -2 "$work/err")"; fi
done < <(awk '/^## / {use = ($0 == "## Use")} use && /^```sh/ {on = 1; next} /^```/ {on = 0} use && on && /^build\/tarnn/' "$SRC/README.md")
[[ "$(awk '/^```sh/ {on = 1; next} /^```/ {on = 0} on' "$SRC/README.md")" == *" ["*"]"* ]] && bad "a bracketed [--flag] in a README command" || ok
# the Python example, where the module is built
if [ -d "$BUILD/python" ]; then
  awk '/^```python/ {on = 1; next} /^```/ {on = 0} on' "$SRC/README.md" >"$work/example.py"
  PYTHONPATH="$BUILD/python" $PY "$work/example.py" >"$work/out" 2>"$work/err" && [ -s digits.png ] && ok || bad "README's Python example: $(tail -2 "$work/err")"
fi
echo "$skipped README lines skipped (no data/mnist here)"
finish
