"""Refusals of the Python tools, many in one interpreter: each case runs a tool as its __main__
with its arguments, and must end non-zero having said what it was given to say. One process for
all of them, not one each: importing torch is 2.3 s of every run of export.py or train.py here,
and a refusal only reads a file or two before it stops.

usage: refusals.py CASES   (a JSON object a line: "what", "want", "argv": [tool.py, args...], and
                           "one_line": true where the tool must print that one line and no other)
Prints a FAIL line for each case that does not hold, then "N passed, M failed"; exit 1 on any.
"""
import json
import os
import runpy
import sys
import tempfile
import traceback


def run(argv):
    """(exit status, everything printed) of argv[0] run as __main__, its children's output too."""
    with tempfile.TemporaryFile("w+") as out:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        sys.argv = list(argv)
        try:
            runpy.run_path(argv[0], run_name="__main__")
            rc = 0
        except SystemExit as e:  # as the interpreter would: a message is printed, status 1
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: B036 (an uncaught exception ends a process with status 1)
            traceback.print_exc()
            rc = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        out.seek(0)
        return rc, out.read()


def main():
    passed = failed = 0
    for line in open(sys.argv[1]):
        case = json.loads(line)
        rc, text = run(case["argv"])
        last = " | ".join(text.strip().splitlines()[-2:])
        if rc == 0:
            print(f"FAIL: {case['what']}: succeeded")
        elif case["want"] not in text:
            print(f"FAIL: {case['what']}: no '{case['want']}' in: {last}")
        elif case.get("one_line") and len(text.strip().splitlines()) != 1:
            print(f"FAIL: {case['what']}: not one line: {text.strip()!r}")
        else:
            passed += 1
            continue
        failed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
