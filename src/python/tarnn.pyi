"""Type stubs of the tarnn extension module (src/python/module.cpp); docs/PYTHON.md."""

from typing import Optional

import numpy as np
import numpy.typing as npt

__version__: str
git_commit: str

class Model:
    """A model made ready on a device (weights loaded and laid out once)."""

    def __init__(self, path: str, device: str = "cpu", threads: Optional[int] = None,
                 precision: str = "fp32", batch: Optional[int] = None,
                 state: str = "fp32") -> None:
        """path: a model folder (config.json + model.safetensors); device: 'cpu' or 'cuda';
        threads: CPU threads (None: every core); precision: the GEMMs, as `--precision`; batch:
        images in memory at once (None: 256 on the CPU, what fits on the GPU); state: how S and
        z are stored, as `--state` (help(tarnn.Model) lists both). Raises OSError for files,
        ValueError for bad arguments or contents, RuntimeError for the device."""
    @property
    def config(self) -> dict: ...
    @property
    def parameters(self) -> int: ...
    @property
    def state_bytes_per_image(self) -> int: ...
    @property
    def device(self) -> str: ...
    def sample(self, n: int, seed: int = 0, first: int = 0, batch: Optional[int] = None,
               progress: bool = False) -> npt.NDArray[np.uint8]:
        """Images first .. first + n - 1 of a run with `seed`, shape (n, H, W, C); image i is
        the command's image i, byte for byte. Ctrl-C raises KeyboardInterrupt between steps."""
    def score(self, images: npt.NDArray[np.uint8],
              progress: bool = False) -> npt.NDArray[np.float64]:
        """Teacher-forced bits/dim of each of `images` ((n, H, W) or (n, H, W, C), uint8)."""
    def complete(self, images: npt.NDArray[np.uint8], known: npt.NDArray,
                 samples: int = 1, seed: int = 0,
                 progress: bool = False) -> npt.NDArray[np.uint8]:
        """Each image completed `samples` times, shape (n, samples, H, W, C); bytes where
        `known` ((H, W), (H, W, C) or one per image) is true are kept."""

def read_images(path: str) -> npt.NDArray[np.uint8]:
    """An IDX file or a PNG as (n, H, W, C) uint8, as stored."""

def grid(
    images: npt.NDArray[np.uint8],
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

def write_png(path: str, image: npt.NDArray[np.uint8]) -> None:
    """A PNG of a (H, W) or (H, W, C) uint8 array, written atomically."""
