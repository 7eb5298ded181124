"""The Python examples of README.md and docs/PYTHON.md run as written, on the README's route: the
module of the build tree (PYTHONPATH=build/python, as ctest sets it), from a folder laid out as
the repository. Each block is its own program; one that reads data/mnist is skipped without it
(tools/mnist_data.py makes it). tests/python/venv_test.sh runs them again in a pip-installed venv."""

import os
import re
import subprocess
import sys

import pytest

SRC = os.environ["TARNN_SOURCE"]


def examples():
    for doc in ("README.md", os.path.join("docs", "PYTHON.md")):
        with open(os.path.join(SRC, doc), encoding="utf-8") as f:
            blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.M | re.S)
        for n, code in enumerate(blocks, 1):
            yield pytest.param(code, id=f"{doc}#{n}")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A folder laid out as the repository (its models and data), where outputs may go."""
    d = tmp_path_factory.mktemp("repo")
    for name in ("models", "data"):
        if os.path.isdir(os.path.join(SRC, name)):
            os.symlink(os.path.join(SRC, name), d / name)
    return d


@pytest.mark.parametrize("code", examples())
def test_example_runs_as_written(code, repo):
    if "data/mnist" in code and not os.path.isdir(repo / "data" / "mnist"):
        pytest.skip("no data/mnist (tools/mnist_data.py --out data/mnist makes it)")
    if "import torch" in code:
        pytest.importorskip("torch")
    run = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
