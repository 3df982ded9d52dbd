"""Which rasterizer trains the splats (twinscan.gaussians.backend) and with which densification strategy.

Both rasterizers have `gsplat.rasterization`'s signature and semantics, so the trainer does not know which it got.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from twinscan.errors import TwinscanError
from twinscan.gaussians.backend import select_render_backend


@dataclass(frozen=True)
class Backend:
    device: str  # "cuda" or "cpu"
    strategy: str  # "default" or "mcmc"
    rasterize: Callable


def select_backend(device: str = "auto", strategy: str = "auto") -> Backend:
    """The render backend (twinscan.gaussians.backend) with the densification strategy it can run."""
    render = select_render_backend(device, notice="training splats")
    if render.device == "cuda":
        return Backend("cuda", "mcmc" if strategy == "auto" else strategy, render.rasterize)
    if strategy == "mcmc":
        raise TwinscanError("the MCMC strategy needs CUDA (gsplat's relocation kernel has no CPU version)",
                            "use --strategy default on the CPU, or train on a CUDA GPU")
    return Backend("cpu", "default", render.rasterize)


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
