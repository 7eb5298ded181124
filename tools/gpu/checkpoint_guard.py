"""The checkpoint guard on the torch at hand (issue 42, point 1): each of
tests/tools/hostile_checkpoints.py's files is refused by tools/export.py and tools/train.py in one
line, and none creates its file. Then the control: with --trust-pickle, export.py hands the
TorchScript archive to this torch, and the file appears, so the archive is hostile on this torch
too and the refusals above are what kept it out.

CI runs it on Debian's torch (1.13); the lease runs it on the GPU machine's (2.11), whose torch
this machine cannot install (tools/gpu/lease.sh, the test step).

usage: checkpoint_guard.py   prints one line per check, then "checkpoint guard on torch V: ..."
and exits 1 if any check failed.
"""
import argparse
import os
import subprocess
import sys
import tempfile

SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# what each file is refused for (the tool's one line holds it)
REFUSALS = {
    "evil.pt": "not a weights-only file",
    "evil-ts.pt": "is a TorchScript archive",
    "evil-ts-folder.pt": "is a TorchScript archive",
    "evil-tar.pt": "is in torch's legacy tar format",
}


def tool(work, *args):
    """A tool's exit status and its output's lines."""
    r = subprocess.run([sys.executable, *args], cwd=work, capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip().splitlines()


def refused(work, pwned, name, want, argv):
    rc, lines = tool(work, *argv)
    ok = rc != 0 and len(lines) == 1 and want in lines[0] and not os.path.exists(pwned)
    print(f"{'ok' if ok else 'FAIL'}: {argv[0].split('/')[-1]} {name}: exit {rc}: "
          f"{lines[-1] if lines else '(nothing)'}")
    return ok


def main():
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    import torch  # after --help, which needs none

    with tempfile.TemporaryDirectory() as work:
        pwned = os.path.join(work, "pwned")
        subprocess.run([sys.executable, os.path.join(SRC, "tests/tools/hostile_checkpoints.py"),
                        work, pwned], check=True)
        export, train = os.path.join(SRC, "tools/export.py"), os.path.join(SRC, "tools/train.py")
        results = []
        for name, want in REFUSALS.items():
            results.append(refused(work, pwned, name, want, [export, name, "--out", "m"]))
        results.append(refused(work, pwned, "evil-ts.pt", REFUSALS["evil-ts.pt"],
                               [train, "--eval-only", "--ckpt", "evil-ts.pt", "--heldout", "x"]))
        # the control: trusted, this torch runs the archive's __setstate__ (export then fails on
        # what it read; the file is what matters)
        tool(work, export, "evil-ts.pt", "--out", "m", "--trust-pickle")
        hostile = os.path.exists(pwned)
        print(f"{'ok' if hostile else 'FAIL'}: with --trust-pickle, evil-ts.pt "
              f"{'created its file: hostile on this torch' if hostile else 'created nothing'}")
        results.append(hostile)
    failed = results.count(False)
    print(f"checkpoint guard on torch {torch.__version__}: {len(results) - failed} of "
          f"{len(results)} checks held")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
