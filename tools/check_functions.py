#!/usr/bin/env python3
"""The length of every function outside the tests (GUIDE.md: short functions with one job).

Usage: check_functions.py [SRC] [--list]

Walks SRC (the checkout; default: this file's): the Python in *.py outside tests/, build*/ and dot
folders, each def from its first line to its last, nested functions inside their outer one; and
the C, C++ and CUDA of include/, kernels/, src/ and tools/, each function definition from the line
with its name to its closing brace, as universal-ctags finds them (macro bodies such as
PYBIND11_MODULE and lambdas are not seen). A function over 80 lines is a violation. One over 60
is allowed, at most a handful of them in each language, when the comment block just above its
def or declaration (or a Python docstring) says why, starting "Over 60 lines:". Prints each over
60 and the count of violations; exits 1 when there is one, 0 otherwise. --list prints every
function over 60 lines even when it has its reason.
"""

import argparse
import ast
import pathlib
import subprocess
import sys

LIMIT = 80  # no function outside the tests is longer
LONG = 60  # longer needs a reason in its comment
HANDFUL = 5  # how many may be LONG with a reason
REASON = "Over 60 lines:"
CPP_DIRS = ("include", "kernels", "src", "tools")  # the C, C++ and CUDA outside the tests


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
            said = " ".join((comment_above(lines, node) + " " + (ast.get_docstring(node) or ""))
                            .split())
            yield f"{path.relative_to(src)}:{node.lineno}", node.name, n, REASON in said


def ctags_functions(src, dirs):
    """(path, name, first line, last line) of each C, C++ or CUDA function defined under dirs."""
    try:
        version = subprocess.run(["ctags", "--version"], capture_output=True, text=True).stdout
    except OSError:
        version = ""
    if "Universal Ctags" not in version:  # only it gives a function's end
        sys.exit("check_functions: universal-ctags is needed for the C++ (tools/setup.sh test "
                 "installs it)")
    out = subprocess.run(["ctags", "-R", "--languages=C,C++", "--langmap=C++:+.cu.cuh",
                          "--kinds-C=f", "--kinds-C++=f", "--fields=+ne", "-f", "-", *dirs],
                         cwd=src, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        name, path, *rest = line.split("\t")
        fields = dict(f.split(":", 1) for f in rest if ":" in f)
        if "line" in fields and "end" in fields:
            yield path, name, int(fields["line"]), int(fields["end"])


def cpp_comment_above(lines, first):
    """The // comment lines above a declaration whose name is on line `first` (1-based), past the
    lines of its head above it (a template line, a return type on a line of its own)."""
    i = first - 1
    while i > 0 and lines[i - 1].strip() and not lines[i - 1].lstrip().startswith("//") \
            and not lines[i - 1].rstrip().endswith((";", "}", "{")):
        i -= 1
    block = []
    while i > 0 and lines[i - 1].lstrip().startswith("//"):
        block.append(lines[i - 1].lstrip().lstrip("/").strip())
        i -= 1
    return " ".join(reversed(block))


def long_cpp_functions(src):
    """(where, name, lines, has its reason) for each C, C++ or CUDA function over LONG lines."""
    dirs = [d for d in CPP_DIRS if (src / d).is_dir()]
    texts = {}
    for path, name, first, last in (ctags_functions(src, dirs) if dirs else []):
        n = last - first + 1
        if n > LONG:
            if path not in texts:
                texts[path] = (src / path).read_text(errors="replace").splitlines()
            said = " ".join(cpp_comment_above(texts[path], first).split())
            yield f"{path}:{first}", name, n, REASON in said


def report(found, show_all):
    """Prints each function over LONG lines that breaks the rule (all with show_all); returns the
    count of violations, a handful exceeded counting as one."""
    violations = 0
    for where, name, n, reasoned in found:
        if n > LIMIT:
            print(f"{where}: {name} is {n} lines, over {LIMIT}")
        elif not reasoned:
            print(f"{where}: {name} is {n} lines, over {LONG} with no \"{REASON}\" comment")
        elif show_all:
            print(f"{where}: {name} is {n} lines, its reason given")
            continue
        else:
            continue
        violations += 1
    if len(found) > HANDFUL:
        print(f"{len(found)} functions over {LONG} lines, more than a handful ({HANDFUL})")
        violations += 1
    return violations


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", nargs="?", default=pathlib.Path(__file__).resolve().parent.parent,
                   type=pathlib.Path, help="the checkout to check (default: this file's)")
    p.add_argument("--list", action="store_true", help="print every function over 60 lines")
    args = p.parse_args()
    python = [f for path in python_files(args.src) for f in long_functions(path, args.src)]
    violations = report(python, args.list) + report(list(long_cpp_functions(args.src)), args.list)
    print(f"{violations} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
