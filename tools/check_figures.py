#!/usr/bin/env python3
"""Every measured figure in the docs has a recorded run behind it: a figure lives in one recorded
place, and the README, the other documents and the comments point there, never retype it alone.

    tools/check_figures.py [ROOT]    exit 0, or 1 with FILE:LINE: why, for each figure that fails

A figure is a number followed by a unit of measurement: a rate (images/s, completions/s,
pixels/s, GFLOP/s, TFLOP/s, MB/s, GB/s, TB/s, "images per second"), bits/dim, a time (us, ms, s,
seconds, minutes), a size (KB, MB, GB, TB, KiB, MiB, GiB) or a ratio written onto its number
(1.66x); a run of numbers before one unit is a run of figures ("22.77 and 22.53 against 27.71
images/s", "29.47 (27.25-31.00) images/s"); in a table, every number of a column whose header
names a rate, bits/dim or ms. A number with no unit after it (nor in its column's header) is not
seen: write the unit after each figure. Counts of bytes ("270,336 bytes") are no figures: a
state's or a cache's size follows from the model's shape (docs/SPEC.md), and a measured size is
in KB/MB/GB.

The recorded places (RECORDED): docs/RESULTS.md with its runs under tools/bench/runs, and
docs/CUDA.md for the GPU; and the studies kept the same way, each figure beside the command that
printed it or the run that holds it: docs/PRECISION.md and docs/STATE.md (their runs under
tools/bench/runs too), docs/COMPLETE.md and docs/SERVE.md, and a model's MODEL_CARD.md. Every
other document (the README, SPEC, ARCHITECTURE, ...) only points to them.

A figure passes when one of these holds (checked per block: a paragraph, a list item, a table, a
fenced block):
  1. It is the paper's (PAPER: its Tables 1 and 2, section 4.2), in a block or section that says
     "paper".
  2. It is not a measurement and says so: its sentence, its block's bold lead or its section's
     heading says "derived" (worked out from other figures or the shape, the arithmetic beside
     it), "estimate(d)" or "expected" (a prediction not yet measured); or it is a setting, "every
     10 seconds", "at most 64 KiB", "up to", "default", "limit".
  3. Its block links to (or names) a recorded document that prints the same number, as written
     here or rounded to the digits shown here (1.046137 shown as 1.046). This is the only way a
     pointing document may quote a figure (not from a run file directly: the recorded document
     is its one place), and the quote cannot drift from its source.
  4. In a recorded document: its block names runs under tools/bench/runs (a path, a glob, or a
     run's name in a code span or a table cell) and one of them prints it (the run's .txt) or
     holds it (a JSON number, rounded to the digits shown).
  5. In a recorded document: a block of its section names the command that printed it (a
     `tarnn ...`, `build/...`, `tools/...`, `tests/...`, `perf`, `ncu` ... code span or a fenced
     block of commands), or the same number is printed in such a section of the document.
Besides: in docs/RESULTS.md, a table row that names its run file (plot_bench.py's table) must
give that run's images/s and GFLOP/s as tools/plot_bench.py prints them.

Comments (// and # lines under src/, kernels/, include/, tools/) with a rate or bits/dim must name
the document the figure comes from (docs/NAME.md or NAME.md) in the same comment, unless the
figure is an example of output (in quotes or after "e.g.") or rule 2 holds.
"""
import argparse
import fnmatch
import glob
import json
import os
import re
import sys

RECORDED = ["docs/RESULTS.md", "docs/CUDA.md", "docs/PRECISION.md", "docs/STATE.md",
            "docs/COMPLETE.md", "docs/SERVE.md", "models/*/MODEL_CARD.md"]
RUNS = "tools/bench/runs"

# The paper's Tables 1 and 2 ("Transformers are RNNs", section 4.2): bits/dim, images/s, speed-up.
PAPER = {("0.621", "bits/dim"), ("0.644", "bits/dim"), ("3.47", "bits/dim"), ("3.40", "bits/dim"),
         ("0.45", "images/s"), ("142.8", "images/s"), ("317", "x"),
         ("0.004", "images/s"), ("17.85", "images/s"), ("4,462", "x")}

NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
RATES = r"images/s|images per second|completions/s|pixels/s|GFLOP/s|TFLOP/s|MB/s|GB/s|TB/s"
UNIT = (rf"\s?(?P<unit>{RATES}|bits/dim|us|ms|s|seconds?|minutes?|KB|kB|MB|GB|TB|KiB|MiB|GiB)"
        r"(?![\w/])")
ONE = rf"(?:{NUM})(?:\s*\((?:{NUM})\s*-\s*(?:{NUM})\))?"  # 29.47 (27.25-31.00)
SEP = r"(?:,\s+|\s+and\s+|\s*/\s*|\s+against\s+|\s+to\s+|-)"
FIGURE = re.compile(rf"(?<![\w.,/^=-])(?:(?P<run>{ONE}(?:{SEP}{ONE})*){UNIT}"
                    rf"|(?P<one>{NUM})(?P<ratio>x)(?!\w))")
NUMBER = re.compile(rf"(?<![\w.^=])({NUM})(?=x?(?:\W|$))")
COLUMN_UNIT = re.compile(rf"{RATES}|bits/dim|\bms\b")
SETTING = re.compile(r"(?:\bevery|\bat most|\bup to|\bdefault:?|\blimit(?:ed)? to)\s*$", re.I)
MARKER = re.compile(r"\bderived\b|\bestimated?s?\b|\bexpected\b", re.I)
COMMAND = re.compile(r"`(?:build[\w-]*/|tools/|tests/|tarnn |\./|perf |ncu |time |strace |"
                     r"python3? |free |lscpu|nvidia-smi|compute-sanitizer |ctest )|^\s*```sh|"
                     r"\btests/[\w/]+\.(?:py|sh|cpp|mjs)\b", re.M)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)|((?:docs/|models/[\w-]+/)?[A-Z_]+\.md)\b")
RUN_PATH = re.compile(rf"{RUNS}/[\w./*?-]*")
CODE_OR_CELL = re.compile(r"`([\w./*?-]+)`|\|\s*([\w.-]+\.json)\s*(?=\|)")


def norm(v):
    return v.replace(",", "")


def matches(shown, recorded):
    """Is `recorded` (a number as a record prints it) the figure `shown`, or, with more digits,
    rounded to it?"""
    s, r = norm(shown), norm(str(recorded))
    if s == r:
        return True
    digits = len(s.split(".")[1]) if "." in s else 0
    if "." in r and len(r.split(".")[1]) <= digits:
        return False
    try:
        return f"{float(r):.{digits}f}" == s
    except ValueError:
        return False


class Block:
    def __init__(self, kind, lines, heading):
        self.kind, self.lines, self.heading = kind, lines, heading  # lines: [(number, text)]
        self.text = "\n".join(t for _, t in lines)

    def line_at(self, pos):
        n, off = self.lines[0][0], 0
        for n, t in self.lines:
            if off + len(t) >= pos:
                return n
            off += len(t) + 1
        return n

    def bold_lead(self):
        m = re.match(r"\s*(?:[-*]\s+)?\*\*(.*?)\*\*", self.text, re.S)
        return m.group(1) if m else ""


def split_blocks(text):
    """[[Block]]: the blocks of each section (a heading starts one)."""
    sections, cur, kind, heading = [[]], [], None, ""

    def flush():
        nonlocal cur, kind
        if cur:
            sections[-1].append(Block(kind, cur, heading))
        cur, kind = [], None

    for n, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if kind == "fence":
            cur.append((n, line))
            if s.startswith("```"):
                flush()
        elif s.startswith("```"):
            flush()
            kind, cur = "fence", [(n, line)]
        elif not s:
            flush()
        elif s.startswith("#"):
            flush()
            heading = s
            sections.append([])
        elif s.startswith("|"):
            if kind != "table":
                flush()
            kind = "table"
            cur.append((n, line))
        elif re.match(r"(?:[-*]|\d+\.)\s", s) and not line.startswith("    "):
            flush()
            kind, cur = "item", [(n, line)]
        else:
            if kind == "table":
                flush()
            kind = kind or "para"
            cur.append((n, line))
    flush()
    return sections


def sentence_at(text, pos):
    starts = [text.rfind(sep, 0, pos) for sep in (". ", "; ", "\n\n")]
    ends = [i for i in (text.find(sep, pos) for sep in (". ", "; ")) if i >= 0]
    return text[max(starts) + 1: min(ends) if ends else len(text)]


def cells(row):
    return [c.strip() for c in row.strip().strip("|").split("|")]


def figures(block):
    """[(line, value, unit, position in block.text)] of the block's figures."""
    found = []
    for m in FIGURE.finditer(block.text):
        unit, run = (m.group("unit"), "run") if m.group("run") else ("x", "one")
        for v in NUMBER.finditer(m.group(run)):
            pos = m.start(run) + v.start()
            found.append((block.line_at(pos), v.group(1), unit, pos))
    if block.kind == "table":
        head = cells(block.lines[0][1])
        units = {i: COLUMN_UNIT.search(h).group(0) for i, h in enumerate(head)
                 if COLUMN_UNIT.search(h)}
        off = len(block.lines[0][1]) + 1
        for n, row in block.lines[1:]:
            for i, c in enumerate(row.strip().strip("|").split("|")):
                if i in units and not FIGURE.search(c) and "`" not in c:
                    for v in NUMBER.finditer(c):
                        found.append((n, v.group(1), units[i], off + row.find(c) + v.start()))
            off += len(row) + 1
    return found


class Records:
    """The numbers the recorded documents print and the runs under tools/bench/runs hold."""

    def __init__(self, root):
        self.root, self.docs, self.runs = root, {}, {}
        self.recorded = set()
        for pattern in RECORDED:
            self.recorded |= {os.path.relpath(p, root) for p in glob.glob(f"{root}/{pattern}")}
        self.run_files = sorted(os.path.relpath(p, root) for p in glob.glob(
            f"{root}/{RUNS}/**/*", recursive=True) if os.path.isfile(p))

    def doc_numbers(self, doc):
        if doc not in self.docs:
            with open(os.path.join(self.root, doc), encoding="utf-8") as f:
                self.docs[doc] = set(NUMBER.findall(f.read()))
        return self.docs[doc]

    def run_numbers(self, path):
        if path not in self.runs:
            with open(os.path.join(self.root, path), encoding="utf-8") as f:
                text = f.read()
            nums = set(NUMBER.findall(text))
            if path.endswith(".json"):
                nums |= set(json_numbers(json.loads(text)))
            self.runs[path] = nums
        return self.runs[path]

    def linked(self, block, doc):
        """The recorded documents a block links to or names."""
        out = set()
        for m in LINK.finditer(block.text):
            target = m.group(1) or m.group(2)
            for base in (os.path.dirname(doc), ""):
                p = os.path.normpath(os.path.join(base, target))
                if p in self.recorded:
                    out.add(p)
        return out

    def named_runs(self, block):
        """The run files a block names: paths and globs under tools/bench/runs, or run names."""
        out = set()
        for m in RUN_PATH.finditer(block.text):
            pat = m.group(0).rstrip(".")
            pat = pat + "*" if pat.endswith("/") else pat
            out |= {f for f in self.run_files if fnmatch.fnmatch(f, pat)
                    or fnmatch.fnmatch(f, pat + ".*")}
        for m in CODE_OR_CELL.finditer(block.text):
            name = m.group(1) or m.group(2)
            out |= {f for f in self.run_files if os.path.basename(f) == name
                    or os.path.splitext(os.path.basename(f))[0] == name}
        return out


def json_numbers(v):
    if isinstance(v, dict):
        for x in v.values():
            yield from json_numbers(x)
    elif isinstance(v, list) and len(v) < 10000:
        for x in v:
            yield from json_numbers(x)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        yield repr(v)


def not_a_measurement(block, value, unit, pos):
    """Rules 1 and 2."""
    if SETTING.search(block.text[:pos]):
        return True
    if (value, unit) in PAPER and re.search(r"\bpaper", block.text + block.heading, re.I):
        return True
    return any(MARKER.search(t) for t in
               (sentence_at(block.text, pos), block.bold_lead(), block.heading))


def results_rows(records, block):
    """docs/RESULTS.md's table rows that name their run file give that run's figures."""
    bad, head = [], cells(block.lines[0][1])
    for n, row in block.lines[2:]:
        cs = cells(row)
        names = [c for c in cs if c.endswith(".json")]
        if len(names) != 1 or len(cs) != len(head):
            continue
        path = os.path.join(records.root, RUNS, names[0])
        if not os.path.exists(path):
            bad.append((n, f"names {names[0]}, which is not under {RUNS}"))
            continue
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
        want = {"images/s": f"{r['images_per_second']:.4g}",
                "GFLOP/s": f"{r['gflops_achieved']:.1f}"}
        for h, c in zip(head, cs):
            key = h.split()[0]
            if key in want and c.split()[0] != want[key]:
                bad.append((n, f"{h} {c}, but {names[0]} holds {want[key]}"))
    return bad


def check_doc(records, doc, text):
    bad, unresolved, printed = [], [], set()  # printed: numbers of sections naming a command
    is_recorded = doc in records.recorded
    for section in split_blocks(text):
        has_command = is_recorded and any(COMMAND.search(b.text) for b in section)
        for b in section:
            if doc == "docs/RESULTS.md" and b.kind == "table":
                bad += [(doc, n, why) for n, why in results_rows(records, b)]
            if has_command:
                printed |= {norm(v) for v in NUMBER.findall(b.text)}
                continue
            held = set().union(*(records.doc_numbers(d) for d in records.linked(b, doc)))
            runs = set().union(*(records.run_numbers(r) for r in records.named_runs(b))) \
                if is_recorded else set()
            for n, value, unit, pos in figures(b):
                if not (not_a_measurement(b, value, unit, pos)
                        or any(matches(value, r) for r in held | runs)):
                    unresolved.append((n, value, unit))
    for n, value, unit in unresolved:
        if is_recorded and any(matches(value, r) for r in printed):
            continue
        where = ("names no command or run in its section, and links to no recorded document "
                 "that prints it" if is_recorded else
                 "is not in a block that links to a recorded document printing it "
                 "(docs/RESULTS.md, docs/CUDA.md, ...)")
        bad.append((doc, n, f"{value} {unit} {where}"))
    return bad


COMMENT = re.compile(r"^\s*(?://|#(?!include|pragma|define|if|endif|else|undef|!))(.*)$")
RATE = re.compile(rf"(?<![\w.])(?:{NUM})\s?(?:{RATES}|bits/dim)(?![\w/])")


def comment_groups(lines):
    """Runs of consecutive comment lines: [[(number, text)]]."""
    groups, cur = [], []
    for n, line in enumerate(lines, 1):
        m = COMMENT.match(line)
        if m:
            cur.append((n, m.group(1)))
        elif cur:
            groups.append(cur)
            cur = []
    return groups + ([cur] if cur else [])


def check_comments(root):
    bad, files = [], []
    for top in ("src", "kernels", "include", "tools"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            if RUNS not in dirpath.replace(os.sep, "/"):
                files += [os.path.join(dirpath, n) for n in names
                          if n.endswith((".cpp", ".h", ".cu", ".c", ".py", ".sh"))]
    for path in sorted(files):
        with open(path, encoding="utf-8", errors="replace") as f:
            groups = comment_groups(f.read().split("\n"))
        for g in groups:
            text = " ".join(t for _, t in g)
            if re.search(r"\b(?:docs/)?[A-Z_]+\.md\b", text):
                continue
            for n, t in g:
                for m in RATE.finditer(t):
                    quoted = t[:m.start()].count('"') % 2 == 1 or "e.g." in t[:m.start()]
                    example = re.match(r"\s{3,}", t)  # an indented example of output
                    if not (quoted or example or MARKER.search(sentence_at(t, m.start()))):
                        bad.append((os.path.relpath(path, root), n,
                                    f"{m.group(0)} in a comment that names no document it "
                                    "comes from (docs/RESULTS.md, docs/CUDA.md, ...)"))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."),
                    help="the tree to check (default: this checkout)")
    root = ap.parse_args().root
    records = Records(root)
    docs = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(f"{root}/docs/*.md"))
    docs += sorted(records.recorded - set(docs))
    bad = []
    for doc in docs:
        if os.path.exists(os.path.join(root, doc)):
            with open(os.path.join(root, doc), encoding="utf-8") as f:
                bad += check_doc(records, doc, f.read())
    bad += check_comments(root)
    for doc, n, why in bad:
        print(f"{doc}:{n}: {why}")
    print(f"check_figures: {len(bad)} figure(s) without a recorded run")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
