"""Type stubs of the tarnn extension module (src/python/module.cpp); docs/PYTHON.md."""

import os
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

__version__: str
git_commit: str

# A path as open() takes it: str, bytes or os.PathLike (pathlib.Path).
_Path = Union[str, bytes, os.PathLike]
# An array as numpy, or anything with __array__ or __dlpack__ (a torch tensor on the CPU, jax).
_ArrayLike = Any

class Model:
    """A model made ready on a device (weights loaded and laid out once)."""

    def __init__(self, path: _Path, device: str = "cpu", threads: Optional[int] = None,
                 precision: str = "fp32", batch: Optional[int] = None,
                 state: str = "fp32") -> None:
        """path: a model folder (config.json + model.safetensors), or an installed model's name
        ("mnist"), found as `tarnn --model` finds it; device: 'cpu' or 'cuda';
        threads: CPU threads (None: every core); precision: the GEMMs, as `--precision`; batch:
        images in memory at once (None: 256 on the CPU, what fits on the GPU); state: how S and
        z are stored, as `--state` (help(tarnn.Model) lists both). Raises OSError for files,
        ValueError for bad arguments or contents, RuntimeError for the device."""
    def __repr__(self) -> str:
        """The model's folder, device, precision, state, threads, batch, image shape."""
    @property
    def config(self) -> dict: ...
    @property
    def parameters(self) -> int: ...
    @property
    def state_bytes_per_image(self) -> int: ...
    @property
    def device(self) -> str: ...
    def sample(self, n: int, seed: int = 0, first: int = 0, batch: Optional[int] = None,
               progress: bool = False, temperature: float = 1.0) -> npt.NDArray[np.uint8]:
        """Images first .. first + n - 1 of a run with `seed`, shape (n, H, W, C); image i is
        the command's image i, byte for byte. temperature: the sampler's, as `--temperature`
        (1: the model's distribution). Ctrl-C raises KeyboardInterrupt between steps."""
    def score(self, images: _ArrayLike, progress: bool = False) -> npt.NDArray[np.float64]:
        """Teacher-forced bits/dim of each of `images` (uint8 NHWC (n, H, W, C), or (n, H, W)
        for one channel; NCHW is refused)."""
    def complete(self, images: _ArrayLike, known: _ArrayLike,
                 samples: int = 4, seed: int = 0, progress: bool = False,
                 temperature: float = 1.0) -> npt.NDArray[np.uint8]:
        """Each image completed `samples` times, shape (n, samples, H, W, C); bytes where
        `known` ((H, W), (H, W, C) or one per image) is true are kept."""

def read_images(path: _Path) -> npt.NDArray[np.uint8]:
    """An IDX file or a PNG as (n, H, W, C) uint8, as stored."""

def grid(
    images: _ArrayLike,
    nrow: Optional[int] = None,
    padding: int = 2,
    pad_value: int = 64,
    scale: Optional[int] = None,
    *,
    cols: Optional[int] = None,
) -> npt.NDArray[np.uint8]:
    """The images, (n, H, W) or (n, H, W, C) channels last, tiled as torchvision's make_grid
    (nrow per row, None: square-ish; padding pixels of pad_value 0..255 between and around them)
    and each pixel drawn scale x scale times (None: whole pixels toward 600): (H', W', C), the
    same bytes as `tarnn sample -o` with the same --nrow, --padding, --pad-value, --scale."""

def to_uint8(images: _ArrayLike) -> npt.NDArray[np.uint8]:
    """Floats in [0, 1] as bytes, round(x * 255), same shape; outside [0, 1] or NaN: ValueError."""

def to_float(images: _ArrayLike) -> npt.NDArray[np.float32]:
    """uint8 bytes as float32 in [0, 1], x / 255, same shape (to_uint8 undoes it exactly)."""

def write_png(path: _Path, image: _ArrayLike) -> None:
    """A PNG of a (H, W) or (H, W, C) uint8 array, written atomically; the name must end in
    .png (any case), as `tarnn sample -o` (ValueError otherwise)."""
