"""import tarnn takes what the ecosystem holds: torch tensors (uint8 NHWC, views, DLPack), numpy
views, os.PathLike paths; NCHW is refused with the way to NHWC; floats in [0, 1] convert both
ways; errors name Python's parameters; repr says what a Model is. Run by ctest as test_module.py."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tarnn

torch = pytest.importorskip("torch")

SMALL = pathlib.Path(os.environ["TARNN_SOURCE"]) / "tests" / "golden" / "small"


@pytest.fixture(scope="module")
def small():
    return tarnn.Model(SMALL, threads=2)  # a pathlib.Path


@pytest.fixture(scope="module")
def images():
    return tarnn.read_images(SMALL / "inputs-idx-ubyte")  # (3, 5, 4, 2) uint8


def test_torch_tensors_are_taken_as_their_arrays(small, images):
    base = small.score(images)
    assert np.array_equal(small.score(torch.from_numpy(images)), base)  # uint8 NHWC
    # a view that is not contiguous: an NCHW tensor permuted to NHWC
    nchw = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    assert not nchw.permute(0, 2, 3, 1).is_contiguous()
    assert np.array_equal(small.score(nchw.permute(0, 2, 3, 1)), base)
    known = torch.zeros(5, 4, dtype=torch.bool)
    known[:2] = True
    out = small.complete(torch.from_numpy(images), known, samples=2, seed=4)
    assert np.array_equal(out, small.complete(images, known.numpy(), samples=2, seed=4))


def test_grid_and_write_png_take_what_score_takes(images, tmp_path):
    # a torch tensor (contiguous or a permuted view) is drawn as its array: one conversion for
    # score, grid and write_png, never pybind11's signature listing the tensor
    t = torch.from_numpy(images)
    base = tarnn.grid(images)
    assert np.array_equal(tarnn.grid(t), base)
    assert np.array_equal(tarnn.grid(t.permute(0, 3, 1, 2).contiguous().permute(0, 2, 3, 1)), base)
    tarnn.write_png(tmp_path / "g.png", torch.from_numpy(base))
    assert np.array_equal(tarnn.read_images(tmp_path / "g.png")[0], base)
    with pytest.raises(TypeError) as e:
        tarnn.grid([[1, 2]] * 1000)
    assert "images must be an array" in str(e.value) and len(str(e.value)) < 200


def test_dlpack_and_numpy_views(small, images):
    class OnlyDLPack:  # what a library without __array__ hands over
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    base = small.score(images)
    assert np.array_equal(small.score(OnlyDLPack(torch.from_numpy(images))), base)
    flipped = images[:, ::-1]  # negative strides: a view, read as it looks
    assert np.array_equal(small.score(flipped), small.score(np.ascontiguousarray(flipped)))


def test_nchw_is_refused_with_the_layouts(small, images):
    nchw = torch.from_numpy(images).permute(0, 3, 1, 2)
    with pytest.raises(ValueError, match=r"NHWC.*\(n, 5, 4, 2\).*NCHW.*permute\(0, 2, 3, 1\)"):
        small.score(nchw)


def test_floats_in_0_1_convert_both_ways(small, images):
    f = tarnn.to_float(torch.from_numpy(images))
    assert f.dtype == np.float32 and f.shape == images.shape
    assert f.min() >= 0 and f.max() <= 1
    assert np.array_equal(tarnn.to_uint8(f), images)
    assert np.array_equal(tarnn.to_uint8(torch.from_numpy(f).double()), images)
    assert np.array_equal(tarnn.to_uint8(np.array([0.0, 0.5 / 255, 0.499 / 255, 1.0])),
                          [0, 1, 0, 255])
    assert tarnn.to_uint8(images) is not None  # bytes come back as they are
    with pytest.raises(ValueError, match=r"in \[0, 1\].*astype"):
        tarnn.to_uint8(f * 255)
    with pytest.raises(ValueError, match=r"in \[0, 1\], not nan"):
        tarnn.to_uint8(np.array([np.nan]))
    with pytest.raises(ValueError, match="tarnn.to_uint8"):
        small.score(torch.from_numpy(f))  # the engine's error says how to convert
    with pytest.raises(ValueError, match="uint8"):
        tarnn.to_float(f)


def test_paths_are_path_like(small, images, tmp_path):
    assert np.array_equal(tarnn.read_images(SMALL / "inputs-idx-ubyte"),
                          tarnn.read_images(str(SMALL / "inputs-idx-ubyte")))
    tarnn.write_png(tmp_path / "a.png", images[0, :, :, :1])
    assert tarnn.read_images(tmp_path / "a.png").shape == (1, 5, 4, 1)
    with pytest.raises(TypeError, match="path must be a str or an os.PathLike"):
        tarnn.read_images(3)


def test_type_errors_name_the_type_not_the_value(small):
    with pytest.raises(TypeError) as e:
        small.score(["x" * 1000] * 100)
    assert "images must be an array" in str(e.value) and "list" in str(e.value)
    assert len(str(e.value)) < 200
    with pytest.raises(TypeError) as e:
        tarnn.Model(torch.zeros(100, 100))
    assert "Tensor" in str(e.value) and len(str(e.value)) < 200


def test_errors_name_pythons_parameters(small, images):
    cases = [
        (lambda: tarnn.Model(SMALL, device="tpu"), "device='tpu' is not available"),
        (lambda: tarnn.Model(SMALL, precision="fp16"), "precision='fp16': not a precision"),
        (lambda: tarnn.Model(SMALL, state="fp8"), "state='fp8': not a state format"),
        (lambda: tarnn.Model(SMALL, batch=10**9), "batch must be in"),
        (lambda: tarnn.Model(SMALL, threads=10**6), "threads must be in"),
        (lambda: tarnn.Model(""), "path is empty"),
        (lambda: small.sample(2, first=2**63 - 1), "first must be in .* for n=2 "),
        (lambda: small.complete(images, np.ones((5, 4), bool), samples=0), "samples must be in"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message) as e:
            call()
        assert "--" not in str(e.value), str(e.value)


def test_a_device_that_cannot_run_is_named_as_the_argument():
    try:
        tarnn.Model(SMALL, device="cuda")  # runs where a GPU and the CUDA backend are
    except (ValueError, RuntimeError) as e:
        # no CUDA in this build: "device='cuda' is not available ..."; no GPU: "... (use
        # device='cpu')"
        assert "device='c" in str(e) and "--" not in str(e), str(e)


def test_an_unknown_model_name_says_where_it_looked():
    with pytest.raises(OSError, match="no-such-model: no model folder .* in ./no-such-model"):
        tarnn.Model("no-such-model")


def test_repr_says_what_the_model_is(small):
    r = repr(small)
    for part in (str(SMALL), "(5, 4, 2)", "device='cpu'", "precision='fp32'", "state='fp32'",
                 "threads=2", "6733 parameters"):
        assert part in r, r


def test_a_seed_out_of_range_is_a_value_error(small):
    # Python's ints are unbounded: -1 or 2**64 is a bad value (ValueError naming it), as in the
    # command; an integer of numpy's is a seed like any other
    for seed in (-1, 2**64):
        with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*64 - 1\]"):
            small.sample(1, seed=seed)
        with pytest.raises(ValueError, match=r"seed must be in"):
            small.complete(np.zeros((1, 5, 4, 2), np.uint8), np.zeros((5, 4), bool), seed=seed)
    assert np.array_equal(small.sample(2, seed=np.uint64(2**64 - 1)), small.sample(2, seed=2**64 - 1))
    with pytest.raises(TypeError):
        small.sample(1, seed=1.5)


def test_a_grid_of_no_images_is_refused():
    with pytest.raises(ValueError, match="a grid needs at least one image"):
        tarnn.grid(np.zeros((0, 3, 3), np.uint8))



def test_an_array_too_large_to_copy_is_an_error_not_a_crash():
    # Broadcast views cost nothing until copied: in C order, 2**45 images of the small model's are
    # 1.4 PB. Each entry point must raise MemoryError naming the size, where pybind11's
    # array_t::ensure dropped NumPy's and handed back a null array, which crashed the interpreter.
    # A copy within the machine's memory that NumPy cannot allocate (here under a limit on the
    # address space) is a MemoryError too. In a child process, so that a crash fails this test,
    # not the run.
    code = f"""
import resource, numpy as np, tarnn
m = tarnn.Model({str(SMALL)!r}, threads=1)
huge = np.broadcast_to(np.zeros((5, 4, 2), np.uint8), (2**45, 5, 4, 2))
def limited():
    vm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm * 1024 + 2**28, resource.RLIM_INFINITY))
    m.score(np.broadcast_to(np.zeros((5, 4, 2), np.uint8), (2**25, 5, 4, 2)))  # 1.3 GB
calls = {{
    "score": lambda: m.score(huge),
    "complete": lambda: m.complete(huge, np.ones((5, 4), bool), samples=1),
    "to_float": lambda: tarnn.to_float(huge),
    "grid": lambda: tarnn.grid(huge),
    "to_uint8": lambda: tarnn.to_uint8(np.broadcast_to(np.float32(0.5), (2**45, 5, 4, 2))),
    "write_png": lambda: tarnn.write_png("never.png", np.broadcast_to(np.uint8(0), (2**25, 2**25))),
    "limited": limited,  # last: the limit stays
}}
for name, call in calls.items():
    try:
        call()
        print(name, "| returned")
    except Exception as e:
        print(name, "|", type(e).__name__, "|", e, flush=True)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"exit {run.returncode}: {run.stdout}{run.stderr}"
    lines = dict(line.split(" | ", 1) for line in run.stdout.splitlines())
    images = "images: its copy as a (35184372088832, 5, 4, 2) uint8 array in C order would be 1.41 PB"
    want = {"score": images, "complete": images, "to_float": images, "grid": images,
            "to_uint8": images.replace("uint8", "float64").replace("1.41", "11.3"),
            "write_png": "image: its copy as a (33554432, 33554432) uint8 array in C order would "
                         "be 1.13 PB",
            "limited": "images: its copy as a (33554432, 5, 4, 2) uint8 array in C order would be "
                       "1.34 GB"}
    assert lines.keys() == want.keys(), run.stdout
    for name, message in want.items():
        assert lines[name].startswith(f"MemoryError | {message}, more than "), lines[name]
