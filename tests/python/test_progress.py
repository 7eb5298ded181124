"""progress=True without tqdm follows tqdm's rules (tarnn/progress.h): in a log, lines with
count, rate and ETA and never a \\r, the last one at the end with the job's seconds; on a terminal
(a pseudo-terminal here), the bar redrawn in place. What is checked is written at the end of a
run (in a log, of a run of at least TARNN_PROGRESS_SECONDS: here a microsecond)."""

import os
import pty
import re
import subprocess
import sys

SRC = os.environ["TARNN_SOURCE"]
SMALL = os.path.join(SRC, "tests", "golden", "small")
# tqdm hidden, as where it is not installed
RUN = ("import sys; sys.modules['tqdm'] = None; import numpy as np, tarnn; "
       f"m = tarnn.Model({SMALL!r}, threads=1); m.sample(3, progress=True); "
       "known = np.zeros((5, 4), bool); known[:2] = True; "
       "m.complete(m.sample(1), known, samples=2, progress=True)")


def test_a_log_gets_lines_with_rate_and_time_and_no_carriage_returns():
    run = subprocess.run([sys.executable, "-c", RUN], capture_output=True,  # bytes: \r kept
                         env=dict(os.environ, TARNN_PROGRESS_SECONDS="0.000001"))
    err = run.stderr.decode()
    assert run.returncode == 0, err
    assert "\r" not in err, repr(err)
    lines = err.splitlines()
    every = r"[0-9]+/[0-9]+ (images|completions)  [0-9.]+ \1/s  (ETA ([0-9]+:[0-9]{2}:[0-9]{2}|\?)|in [0-9.]+ s)"
    assert lines and all(re.fullmatch(every, line) for line in lines), lines
    ends = [line for line in lines if " in " in line]
    assert re.fullmatch(r"3/3 images  [0-9.]+ images/s  in [0-9.]+ s", ends[0]), lines
    assert re.fullmatch(r"2/2 completions  [0-9.]+ completions/s  in [0-9.]+ s", ends[-1]), lines


def test_a_terminal_gets_the_bar():
    main, sub = pty.openpty()
    run = subprocess.run([sys.executable, "-c", RUN], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=sub)
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the other end is closed: everything is read
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    text = out.decode()
    assert run.returncode == 0, text
    assert re.search(r"\r100%\|█{10}\| 3/3 \[[0-9.]+ s, [0-9.]+ images/s\]", text), repr(text)
    assert re.search(r"\r100%\|█{10}\| 2/2 \[[0-9.]+ s, [0-9.]+ completions/s\]", text), repr(text)
