"""temperature= of Model.sample and Model.complete (docs/SPEC.md section 2): the command's bytes
at the same temperature, the same images at any batch, 1 the bytes without one, and what is
refused. Run by ctest with PYTHONPATH=build/python and TARNN (the command)."""

import math
import os
import subprocess

import numpy as np
import pytest

import tarnn

TARNN = os.environ["TARNN"]
SMALL = os.path.join(os.environ["TARNN_SOURCE"], "tests", "golden", "small")


@pytest.fixture(scope="module")
def small():
    return tarnn.Model(SMALL, threads=2)


def test_sample_is_the_commands_at_a_temperature(small, tmp_path):
    subprocess.run([TARNN, "sample", "--model", SMALL, "-n", "6", "--seed", "4", "--quiet",
                    "--temperature", "0.7", "--npy", str(tmp_path / "s.npy")], check=True)
    a = small.sample(6, seed=4, temperature=0.7)
    assert np.array_equal(a, np.load(tmp_path / "s.npy"))
    assert np.array_equal(a, small.sample(6, seed=4, temperature=0.7, batch=1))  # any batch
    assert np.array_equal(a, tarnn.Model(SMALL, threads=1).sample(6, seed=4, temperature=0.7))
    assert not np.array_equal(a, small.sample(6, seed=4))
    assert np.array_equal(small.sample(6, seed=4), small.sample(6, seed=4, temperature=1.0))


def test_complete_is_the_commands_at_a_temperature(small, tmp_path):
    images = tarnn.read_images(os.path.join(SMALL, "inputs-idx-ubyte"))
    subprocess.run([TARNN, "complete", "--model", SMALL, "--images",
                    os.path.join(SMALL, "inputs-idx-ubyte"), "--index", "0-2", "--samples", "2",
                    "--seed", "5", "--temperature", "1.5", "--keep-rows", "2", "--quiet",
                    "--out-dir", str(tmp_path / "c")], check=True)
    known = np.zeros((5, 4), bool)
    known[:2] = True
    done = small.complete(images, known, samples=2, seed=5, temperature=1.5)
    for i in range(3):
        for k in range(2):
            want = tarnn.read_images(tmp_path / "c" / f"{i:08d}-{k:02d}.png")[0]
            assert np.array_equal(done[i, k], want), (i, k)


def test_a_temperature_out_of_range_is_a_value_error(small):
    for t in (0, -1.0, math.nan, math.inf, 1e-50, 1e39):
        with pytest.raises(ValueError, match="temperature must be a finite number above 0"):
            small.sample(1, temperature=t)
        with pytest.raises(ValueError, match="temperature must be"):
            small.complete(np.zeros((1, 5, 4, 2), np.uint8), np.zeros((5, 4), bool), temperature=t)
    with pytest.raises(TypeError):
        small.sample(1, temperature="warm")
