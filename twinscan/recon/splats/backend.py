"""Which rasterizer trains the splats: gsplat's CUDA kernels, or twinscan's CPU rasterizer.

Both have `gsplat.rasterization`'s signature and semantics, so the trainer does not know which it got.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from twinscan.errors import TwinscanError
from twinscan.progress import say


@dataclass(frozen=True)
class Backend:
    device: str  # "cuda" or "cpu"
    strategy: str  # "default" or "mcmc"
    rasterize: Callable


def select_backend(device: str = "auto", strategy: str = "auto") -> Backend:
    """CUDA where it works, else the CPU path (with a notice when the user asked for "auto")."""
    from twinscan.gaussians.raster import cuda_available

    if device == "cuda" and not cuda_available():
        raise TwinscanError("--device cuda was asked for, but no usable CUDA GPU was found (or gsplat's "
                            "CUDA extension did not build)", "use --device cpu or --device auto")
    use_cuda = device == "cuda" or (device == "auto" and cuda_available())
    if device == "auto" and not use_cuda:
        say(("notice:", "yellow"), " no usable CUDA GPU; training splats on the CPU rasterizer")
    if use_cuda:
        from gsplat import rasterization

        chosen = "mcmc" if strategy == "auto" else strategy
        return Backend("cuda", chosen, functools.partial(rasterization, packed=False))
    if strategy == "mcmc":
        raise TwinscanError("the MCMC strategy needs CUDA (gsplat's relocation kernel has no CPU version)",
                            "use --strategy default on the CPU, or train on a CUDA GPU")
    from twinscan.gaussians.raster import rasterize  # its kernels module makes numba's workers sleep, not spin

    return Backend("cpu", "default", functools.partial(rasterize, backend="numba"))


@contextlib.contextmanager
def cpu_training_threads(device: str) -> Iterator[None]:
    """Run torch's part of a CPU step on one thread: it is many small ops, for which extra OpenMP
    threads only spin against the rasterizer's numba workers. Restored afterwards."""
    if device != "cpu":
        yield
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
