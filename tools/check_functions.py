#!/usr/bin/env python3
"""The length of every Python function outside the tests (GUIDE.md: short functions with one job).

Usage: check_functions.py [SRC] [--list]

Walks SRC (the checkout; default: this file's) for *.py outside tests/, build*/ and dot folders
and measures each def from its first line to its last, nested functions inside their outer one.
A function over 80 lines is a violation. One over 60 is allowed, at most a handful of them, when
the comment block just above its def (or its docstring) says why, starting "Over 60 lines:".
Prints each over 60 and the count of violations; exits 1 when there is one, 0 otherwise.
--list prints every function over 60 lines even when it has its reason.
"""

import argparse
import ast
import pathlib
import sys

LIMIT = 80  # no function outside the tests is longer
LONG = 60  # longer needs a reason in its comment
HANDFUL = 5  # how many may be LONG with a reason
REASON = "Over 60 lines:"


def python_files(src):
    """Every *.py under src outside the tests, the build folders and the dot folders, sorted."""
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src).parts
        if parts[0] == "tests" or any(p.startswith(".") or p.startswith("build") for p in parts):
            continue
        yield path


def comment_above(lines, node):
    """The comment lines just above a def (and its decorators), joined into one string."""
    first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1  # 0-based
    block = []
    i = first - 1
    while i >= 0 and lines[i].lstrip().startswith("#"):
        block.append(lines[i].lstrip().lstrip("#").strip())
        i -= 1
    return " ".join(reversed(block))


def long_functions(path, src):
    """(where, name, lines, has its reason) for each function in path over LONG lines."""
    text = path.read_text()
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        n = node.end_lineno - node.lineno + 1
        if n > LONG:
            said = comment_above(lines, node) + " " + (ast.get_docstring(node) or "")
            yield f"{path.relative_to(src)}:{node.lineno}", node.name, n, REASON in " ".join(said.split())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", nargs="?", default=pathlib.Path(__file__).resolve().parent.parent,
                   type=pathlib.Path, help="the checkout to check (default: this file's)")
    p.add_argument("--list", action="store_true", help="print every function over 60 lines")
    args = p.parse_args()
    found = [f for path in python_files(args.src) for f in long_functions(path, args.src)]
    violations = 0
    for where, name, n, reasoned in found:
        if n > LIMIT:
            print(f"{where}: {name} is {n} lines, over {LIMIT}")
        elif not reasoned:
            print(f"{where}: {name} is {n} lines, over {LONG} with no \"{REASON}\" comment")
        elif args.list:
            print(f"{where}: {name} is {n} lines, its reason given")
            continue
        else:
            continue
        violations += 1
    if len(found) > HANDFUL:
        print(f"{len(found)} functions over {LONG} lines, more than a handful ({HANDFUL})")
        violations += 1
    print(f"{violations} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
