"""What the accuracy studies' tables and figures share (tools/plot_state.py, tools/plot_int8.py):
each image's change of bits/dim against the reference's, the mixture parameters' error in the
first and last tenth of the positions, the labels of a `tarnn score --json-file` output, and the
figure of that error against the position, a panel per study.

Imported after the scripts parse their arguments: it needs numpy (and matplotlib to draw).
"""

import os

import numpy as np


def changes(bits, base, threshold):
    """Per-image bits/dim against the reference's: the mean change, the largest one (with its
    sign), and how many images changed by more than threshold."""
    d = np.asarray(bits) - np.asarray(base)
    return d.mean(), d[np.argmax(np.abs(d))], int((np.abs(d) > threshold).sum())


def tenths(worst, mean):
    """The worst error in the first and the last tenth of the positions, then the mean one."""
    k = max(1, len(worst) // 10)
    return worst[:k].max(), worst[-k:].max(), mean[:k].mean(), mean[-k:].mean()


def score_labels(path, j):
    """A score file's (precision, state): its fields, or for older files its name,
    score-PRECISION-STATE.json."""
    named = os.path.basename(path)[:-5].split("-")
    return j.get("precision", named[1]), j.get("state", named[2])


def error_panels(panels, path, size, ylabel, legend_size, worst_style):
    """Draws path: a panel per (title, [(name, mean per position, worst per position)]), each
    line's mean thick and its worst thin in the same colour (worst_style: the thin line's
    matplotlib keywords; with "label" a format of the name)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(size[0] * len(panels), size[1]),
                             squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels):
        for name, mean, worst in lines:
            t = np.arange(len(mean))
            line, = ax.plot(t, mean, label=f"{name}: mean", lw=1.2)
            style = dict(worst_style)
            if "label" in style:
                style["label"] = style["label"].format(name)
            ax.plot(t, worst, color=line.get_color(), **style)
        ax.set_yscale("log")
        ax.set_xlabel("position t")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"\nwrote {path}")
