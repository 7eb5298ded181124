#!/usr/bin/env python3
"""The layering of docs/ARCHITECTURE.md, checked: every `#include "..."` of the library's own files
points down (or within its folder), the public headers include only public headers, and no file
below src/engine compares a device or precision as a string (numerics are enums there).

    tools/check_layers.py [ROOT]     exit 0 and one summary line, or 1 and a line per violation
"""
import argparse
import os
import re
import sys

# The shared folders, lowest first; a file may include its own folder and any lower rank. Every
# other folder of src/ is a backend (src/cpu, src/cuda, a new src/NAME: known by its place, not by
# a list), at BACKEND's rank: backends are peers and may not include each other, and only the
# engine (its registry's one line per backend) and what is above it include them.
RANKS = {
    "src/base": 0,
    "kernels": 1,
    "src/io": 2,
    "src/model": 3,
    "src/softmax": 4,
    "src/engine": 6,
    "src/jobs": 7,
    "src/bench": 7,
    "src/python": 8,
    "src/serve": 8,
    "src/cli": 9,  # the command: its subcommands, and the server it links
}
BACKEND = 5
NUMERIC_NAMES = r'"(cpu|cuda|fp32|bf16|tf32|fp16)"'
STRING_COMPARE = re.compile(r'(==|!=)\s*' + NUMERIC_NAMES + '|' + NUMERIC_NAMES + r'\s*(==|!=)')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".h", ".cpp", ".cu", ".cuh")


def folder_of(path):
    for folder in sorted(RANKS, key=len, reverse=True):
        if path == folder or path.startswith(folder + "/"):
            return folder
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "src":  # a file in a folder of src/ not listed: a backend
        return "src/" + parts[1]
    return None


def rank(folder):
    return RANKS.get(folder, BACKEND)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."),
                    help="the tree to check (default: this checkout)")
    root = os.path.abspath(ap.parse_args().root)
    bad, files, includes = [], 0, 0
    for top in ("src", "kernels", "include"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                files += 1
                here = folder_of(rel)
                with open(path, encoding="utf-8") as f:
                    lines = f.read().split("\n")
                for n, line in enumerate(lines, 1):
                    m = INCLUDE.match(line)
                    if m:
                        includes += 1
                        target = m.group(1)
                        if target.startswith("tarnn/"):
                            continue  # the public API: every layer may use it
                        resolved = os.path.relpath(
                            os.path.normpath(os.path.join(os.path.dirname(path), target)), root)
                        if not os.path.exists(os.path.join(root, resolved)):
                            continue  # a system or generated header
                        there = folder_of(resolved)
                        if rel.startswith("include/"):
                            if not resolved.startswith("include/"):
                                    bad.append(f"{rel}:{n}: a public header includes {resolved}")
                        elif here is None or there is None:
                            bad.append(f"{rel}:{n}: {resolved} is in no layer")
                        elif there != here and rank(there) >= rank(here):
                            bad.append(f"{rel}:{n}: {here} includes {resolved}, "
                                       f"{'a peer' if rank(there) == rank(here) else 'a higher layer'}")
                    if here and rank(here) < RANKS["src/engine"] and STRING_COMPARE.search(line.split("//")[0]):
                        bad.append(f"{rel}:{n}: a device or precision compared as a string below "
                                   f"the engine: {line.strip()}")
    for b in bad:
        print(b)
    print(f"check_layers: {files} files, {includes} includes: "
          f"{len(bad)} violation{'' if len(bad) == 1 else 's'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
