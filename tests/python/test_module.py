"""import tarnn: the Python module against the command (same bytes, same figures), its errors, the
GIL released while the engine runs, and Ctrl-C. Run by ctest with PYTHONPATH=build/python and
TARNN (the command), TARNN_SOURCE (the tree), TARNN_GOLDEN_MNIST (the MNIST-size model)."""

import os
import sys
import signal
import subprocess
import sys
import json
import threading
import time
import types

import numpy as np
import pytest

import tarnn

TARNN = os.environ["TARNN"]
SRC = os.environ["TARNN_SOURCE"]
SMALL = os.path.join(SRC, "tests", "golden", "small")
MNIST = os.environ.get("TARNN_GOLDEN_MNIST", "")


def run(*args):
    return subprocess.run([TARNN, *map(str, args)], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def small():
    return tarnn.Model(SMALL, threads=2)


@pytest.fixture(scope="module")
def mnist():
    if not os.path.isfile(os.path.join(MNIST, "config.json")):
        pytest.skip("no MNIST-size golden (made by ctest's make_golden_mnist, which needs torch)")
    return tarnn.Model(MNIST, threads=2)


def test_model_properties(small):
    assert small.config["height"] == 5 and small.config["channels"] == 2
    assert small.parameters == 6733
    assert small.state_bytes_per_image == 1008
    assert small.device.startswith("cpu")
    assert tarnn.__version__.count(".") == 2


def test_sample_is_the_commands_images(small, tmp_path):
    run("sample", "--model", SMALL, "-n", 5, "--seed", 7, "--first", 3, "--out-dir", tmp_path)
    for i in range(5):
        cmd = tarnn.read_images(str(tmp_path / f"{3 + i:08d}.png"))[0]
        assert np.array_equal(small.sample(5, seed=7, first=3)[i], cmd)
    a = small.sample(5, seed=7, first=3)
    assert a.dtype == np.uint8 and a.shape == (5, 5, 4, 2)
    assert np.array_equal(a, small.sample(5, seed=7, first=3, batch=2))  # any batch
    assert not np.array_equal(a, small.sample(5, seed=8, first=3))


def test_bf16_is_the_commands_bf16(tmp_path):
    run("sample", "--model", SMALL, "-n", 4, "--seed", 2, "--precision", "bf16",
        "--out-dir", tmp_path)
    half = tarnn.Model(SMALL, threads=2, precision="bf16")
    a = half.sample(4, seed=2)
    for i in range(4):
        assert np.array_equal(a[i], tarnn.read_images(str(tmp_path / f"{i:08d}.png"))[0])
    with pytest.raises(ValueError, match="not a precision"):
        tarnn.Model(SMALL, precision="fp16")
    with pytest.raises(ValueError, match="cuda only"):
        tarnn.Model(SMALL, precision="tf32")
    with pytest.raises(ValueError, match="not a state format"):
        tarnn.Model(SMALL, state="fp8")
    assert tarnn.Model(SMALL, state="fp32").state_bytes_per_image == 1008


def test_int8_is_the_commands_int8(tmp_path):
    run("sample", "--model", SMALL, "-n", 4, "--seed", 2, "--precision", "int8",
        "--out-dir", tmp_path)
    a = tarnn.Model(SMALL, threads=2, precision="int8").sample(4, seed=2)
    for i in range(4):
        assert np.array_equal(a[i], tarnn.read_images(str(tmp_path / f"{i:08d}.png"))[0])


def test_sample_is_the_commands_images_at_mnist_size(mnist, tmp_path):
    run("sample", "--model", MNIST, "-n", 3, "--seed", 11, "--out-dir", tmp_path)
    a = mnist.sample(3, seed=11)
    for i in range(3):
        assert np.array_equal(a[i], tarnn.read_images(str(tmp_path / f"{i:08d}.png"))[0])


def test_score_is_the_commands(small):
    images = tarnn.read_images(os.path.join(SMALL, "inputs-idx-ubyte"))
    cmd = json.loads(run("score", "--model", SMALL, "--images",
                         os.path.join(SMALL, "inputs-idx-ubyte"), "--json").stdout)
    got = small.score(images)
    assert got.dtype == np.float64 and got.shape == (3,)
    assert np.allclose(got, cmd["per_image"], rtol=0, atol=1e-12)


def test_score_takes_three_dimensional_gray_and_strided_arrays(mnist):
    images = mnist.sample(2, seed=1)
    base = mnist.score(images)
    assert np.array_equal(mnist.score(images[:, :, :, 0]), base)  # (n, H, W)
    wide = np.zeros((2, 28, 56, 1), np.uint8)
    wide[:, :, ::2] = images
    assert np.array_equal(mnist.score(wide[:, :, ::2]), base)  # not contiguous: copied


def test_complete_keeps_known_bytes_and_is_the_commands(small, tmp_path):
    path = os.path.join(SMALL, "inputs-idx-ubyte")
    images = tarnn.read_images(path)
    known = np.zeros((5, 4), bool)
    known[:2] = True  # the top two rows, every channel
    out = small.complete(images, known, samples=3, seed=4)
    assert out.shape == (3, 3, 5, 4, 2)
    for i in range(3):
        for k in range(3):
            assert np.array_equal(out[i, k, :2], images[i, :2])
    run("complete", "--model", SMALL, "--images", path, "--index", "0-2", "--keep-rows", 2,
        "--samples", 3, "--seed", 4, "-o", tmp_path / "g.png", "--out-dir", tmp_path)
    for i in range(3):
        for k in range(3):
            cmd = tarnn.read_images(str(tmp_path / f"{i:08d}-{k:02d}.png"))[0]
            assert np.array_equal(out[i, k], cmd)
    # a mask per image, over bytes
    per = np.zeros((3, 5, 4, 2), bool)
    per[1, 4] = True
    out2 = small.complete(images, per, samples=1, seed=4)
    assert np.array_equal(out2[1, 0, 4], images[1, 4])


def test_errors_are_pythons(small, tmp_path):
    images = small.sample(2)
    with pytest.raises(ValueError, match="uint8"):
        small.score(images.astype(np.float32))
    with pytest.raises(ValueError, match="shape"):
        small.score(images[:, :4])
    with pytest.raises(ValueError, match="known"):
        small.complete(images, np.ones((3, 3), bool))
    with pytest.raises(ValueError, match="samples"):
        small.complete(images, np.ones((5, 4), bool) * False, samples=0)
    with pytest.raises(ValueError, match="n must be"):
        small.sample(0)
    with pytest.raises(ValueError):
        tarnn.Model(SMALL, device="tpu")
    with pytest.raises(ValueError, match="batch"):
        small.sample(2, batch=-3)
    with pytest.raises(OSError, match="cannot open"):
        tarnn.Model(str(tmp_path / "none"))
    with pytest.raises(OSError, match="cannot open"):
        tarnn.read_images(str(tmp_path / "none.png"))
    (tmp_path / "junk").write_bytes(b"\x00\x00\x08\x03junk")
    with pytest.raises(ValueError, match="truncated"):
        tarnn.read_images(str(tmp_path / "junk"))
    with pytest.raises(TypeError):
        small.sample("three")


def test_every_core_is_the_cores_this_process_may_use():
    # threads=None under an affinity of one core is one thread, as `taskset -c 0 tarnn` (a fresh
    # process: the affinity is set before the engine counts the cores)
    code = ("import os, tarnn; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            f"print(repr(tarnn.Model({SMALL!r})))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert "threads=1," in out and ", 1 thread," in out, out


def test_the_gil_is_released_while_the_engine_runs(mnist):
    # Another Python thread goes on while the engine runs: it ticks (a time each) between its
    # sleeps. Were the GIL held through the run, it could tick at most once in it (before the
    # engine took the GIL for good); any scheduler lets a runnable thread tick again within a run
    # of seconds, however fast or busy the machine.
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    started = time.monotonic()
    mnist.sample(8, seed=2)
    ended = time.monotonic()
    stop.set()
    t.join()
    during = sum(started < tick < ended for tick in ticks)
    assert during >= 2, f"{during} ticks in {ended - started:.2f} s of the engine"


def test_ctrl_c_stops_every_run_and_the_model_stays_usable(mnist, monkeypatch):
    # Every call, not only the first: three in one process (sample, complete, sample), each
    # stopped by a SIGINT sent to the main thread (as a terminal's Ctrl-C reaches Python) from
    # inside the run, at a known point: its progress bar's first update (a stand-in for tqdm,
    # which the module imports when a bar is asked for), not a timer racing the run. The run
    # stops at its next check: the bar sees no second update. Then a whole run gives the same
    # bytes. (A probe found "works once" under GNU timeout, which forwards only the first SIGINT
    # it gets: pure Python's time.sleep behaves the same there.)
    main = threading.main_thread().ident
    want = mnist.sample(2, seed=3)
    updates = []

    class Bar:  # tqdm.tqdm as the module calls it
        def __init__(self, *args, **kwargs):
            pass

        def update(self, n=1):
            updates.append(n)
            if len(updates) == 1:
                signal.pthread_kill(main, signal.SIGINT)

        def close(self):
            pass

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=Bar))
    # Python's own Ctrl-C, even where this process was started with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    known = np.zeros((28, 28), bool)
    known[:14] = True
    calls = (lambda: mnist.sample(1000, seed=3, progress=True),  # minutes each, if not stopped
             lambda: mnist.complete(np.zeros((250, 28, 28), np.uint8), known, samples=4,
                                    progress=True),
             lambda: mnist.sample(1000, seed=4, progress=True))
    try:
        for call in calls:
            updates.clear()
            with pytest.raises(KeyboardInterrupt):
                call()
            assert len(updates) == 1, updates
    finally:
        signal.signal(signal.SIGINT, previous)
    assert np.array_equal(mnist.sample(2, seed=3), want)


@pytest.mark.parametrize("flags, kwargs", [
    ([], {}),  # the same defaults
    (["--nrow", 4, "--padding", 1, "--pad-value", 200, "--scale", 3],
     dict(nrow=4, padding=1, pad_value=200, scale=3)),
    (["--cols", 5, "--padding", 0, "--scale", 1], dict(cols=5, padding=0, scale=1)),
])
def test_grid_and_write_png_are_the_commands(small, tmp_path, flags, kwargs):
    run("sample", "--model", SMALL, "-n", 6, "--seed", 3, "-o", tmp_path / "cmd.png", *flags)
    g = tarnn.grid(small.sample(6, seed=3), **kwargs)
    tarnn.write_png(str(tmp_path / "py.png"), g)
    assert (tmp_path / "py.png").read_bytes() == (tmp_path / "cmd.png").read_bytes()


def test_write_png_names_as_the_command(small, tmp_path):
    # one rule (tarnn::has_extension): .png in any case, as `tarnn sample -o`; else nothing written
    g = tarnn.grid(small.sample(2))
    tarnn.write_png(str(tmp_path / "upper.PNG"), g)
    assert (tmp_path / "upper.PNG").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match=r"must end in \.png"):
        tarnn.write_png(str(tmp_path / "a.jpg"), g)
    assert not (tmp_path / "a.jpg").exists()
    proc = subprocess.run([TARNN, "sample", "--model", SMALL, "-o", tmp_path / "b.jpg"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "must end in .png" in proc.stderr


def test_defaults_are_the_commands(small, tmp_path):
    # one set of defaults (tarnn/jobs.h): seed 0 and 4 completions per image, as `tarnn complete`
    # with neither flag, which uses the top half of the rows as known by default
    path = os.path.join(SMALL, "inputs-idx-ubyte")
    images = tarnn.read_images(path)[:1]
    known = np.zeros((5, 4), bool)
    known[:2] = True
    out = small.complete(images, known)
    j = json.loads(run("complete", "--model", SMALL, "--images", path, "--index", 0, "--json",
                       "-o", tmp_path / "g.png", "--out-dir", tmp_path).stdout)
    assert (j["samples"], j["seed"]) == (out.shape[1], 0) == (4, 0)
    for k in range(4):
        cmd = tarnn.read_images(str(tmp_path / f"00000000-{k:02d}.png"))[0]
        assert np.array_equal(out[0, k], cmd)
    j = json.loads(run("sample", "--model", SMALL, "-n", 2, "--json",
                       "--npy", tmp_path / "s.npy").stdout)
    assert j["seed"] == 0 and np.array_equal(small.sample(2), np.load(tmp_path / "s.npy"))


def test_grid_arguments_are_torchvisions():
    imgs = np.arange(5 * 3 * 2, dtype=np.uint8).reshape(5, 3, 2)  # 5 images of 3 x 2, (n, H, W)
    g = tarnn.grid(imgs, nrow=2, padding=1, pad_value=9, scale=1)
    assert g.shape == (3 * 3 + 4, 2 * 2 + 3, 1)  # ceil(5 / 2) rows: make_grid's layout
    assert g[0, 0, 0] == 9 and g[-1, -1, 0] == 9
    assert np.array_equal(g[1:4, 4:6, 0], imgs[1])  # image 1: row 0, column 1
    assert np.array_equal(tarnn.grid(imgs, 2, 1, 9, scale=2), g.repeat(2, 0).repeat(2, 1))
    assert tarnn.grid(imgs, nrow=2, padding=1, pad_value=9).shape == (13 * 8, 7 * 8, 1)  # to 600


@pytest.mark.parametrize("kwargs, message", [
    (dict(nrow=0), "nrow must be in [1, 65536] (got 0"),
    (dict(padding=-1), "padding must be in [0, 64] (got -1)"),
    (dict(pad_value=256), "pad_value must be in [0, 255] (got 256)"),
    (dict(scale=0), "scale must be in [1, 16]"),
    (dict(scale=17), "scale must be in [1, 16]"),
    (dict(nrow=2, cols=2), "not both"),
])
def test_grid_refuses_bad_values(kwargs, message):
    with pytest.raises(ValueError) as e:
        tarnn.grid(np.zeros((4, 3, 3), np.uint8), **kwargs)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_grid_refuses_channels_first():
    nchw = np.zeros((4, 1, 28, 28), np.uint8)  # PyTorch's layout: not 28 channels
    with pytest.raises(ValueError, match=r"channels first \(NCHW.*transpose\(0, 2, 3, 1\)"):
        tarnn.grid(nchw)
    assert tarnn.grid(nchw.transpose(0, 2, 3, 1), scale=1).shape == (62, 62, 1)


def test_help_explains_each_argument():
    doc = tarnn.Model.sample.__doc__
    for word in ("seed", "first", "batch", "progress", "KeyboardInterrupt"):
        assert word in doc
    assert "known" in tarnn.Model.complete.__doc__


def test_a_mask_that_keeps_everything_is_refused_as_by_the_command(small, tmp_path):
    """Issue 42: complete() with an all-known mask gave the input back where `tarnn complete` and
    serve refuse it: one rule, the same words."""
    images = small.sample(2)
    with pytest.raises(ValueError, match="^the mask keeps every pixel: nothing to complete$"):
        small.complete(images, np.ones((5, 4), bool))
    per = np.zeros((2, 5, 4), bool)
    per[1] = True  # the second image's mask keeps all
    with pytest.raises(ValueError, match="^image 1: the mask keeps every pixel: nothing to"):
        small.complete(images, per)
    first_known = np.zeros((5, 4), bool)
    first_known.flat[0] = True  # p_0 alone: everything else is generated
    assert small.complete(images, first_known, samples=1).shape == (2, 1, 5, 4, 2)


def test_a_long_non_ascii_config_key_is_quoted_whole(tmp_path):
    """Issue 42: the quote of a long unknown key was cut inside a UTF-8 character, and Python got
    an empty ValueError()."""
    model = tmp_path / "m"
    model.mkdir()
    config = json.load(open(os.path.join(SMALL, "config.json")))
    config["x" + "\u00e9" * 30] = 1  # 40 bytes end inside the 20th
    json.dump(config, open(model / "config.json", "w"))
    with pytest.raises(ValueError, match='unknown key "x' + "\u00e9" * 20 + r'\.\.\."'):
        tarnn.Model(str(model))


def test_write_png_follows_links_and_writes_into_fifos(small, tmp_path):
    """Issue 42, point 4: write_png onto a link replaced the link; onto a FIFO, the FIFO."""
    image = small.sample(1)[0]
    (tmp_path / "real").mkdir()
    os.symlink("real/a.png", tmp_path / "link.png")
    tarnn.write_png(tmp_path / "link.png", image)
    assert os.path.islink(tmp_path / "link.png")
    assert np.array_equal(tarnn.read_images(tmp_path / "real" / "a.png")[0], image)
    fifo = tmp_path / "f.png"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open before the write, read after it
    tarnn.write_png(fifo, image)
    data = os.read(reader, 1 << 16)
    os.close(reader)
    assert data.startswith(b"\x89PNG") and open(tmp_path / "real" / "a.png", "rb").read() == data
    assert os.path.exists(fifo) and not os.path.isfile(fifo)  # still a FIFO


def test_an_fp16_state_beyond_its_measured_range_warns_once(tmp_path):
    """Issue 42: --state fp16 on a model with large weights moved results with no word."""
    scale = os.path.join(SRC, "tests", "cli", "scale_weights.py")
    subprocess.run([sys.executable, scale, SMALL, str(tmp_path / "m"),
                    "(query|key|value)_projection.weight", "30"], check=True)
    m = tarnn.Model(str(tmp_path / "m"), state="fp16", threads=2)
    images = tarnn.read_images(os.path.join(SMALL, "inputs-idx-ubyte"))
    with pytest.warns(RuntimeWarning, match=r"^state='fp16': this model's state reached \|S\| = "):
        m.score(images)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: a second run says nothing
        m.score(images)
        tarnn.Model(str(tmp_path / "m"), threads=2).score(images)  # fp32: nothing to say
