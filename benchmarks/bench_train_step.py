"""A whole CPU training step (projection, SH, rasterization forward + backward, L1 + SSIM loss,
Adam, densification bookkeeping), in iterations/s. Goal on 2 cores: >= 15 it/s at 320x180, 10k splats.
In the same run, as ratios to the photometric step alone: the default step (plus the sparse depth loss:
expected depth rendered as a fourth channel, pinned at every view's observed points) and the step with
the geometric priors (recon/splats/geometry.py: flatness every step, the normal pass every 1 or
`geometry_every` steps; off by default).

    python benchmarks/bench_train_step.py [--gaussians 10000 50000] [--steps 30] [--threads 2]
"""

from __future__ import annotations

import argparse
import math
import time

import numba
import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from twinscan.recon.splats import SplatsConfig, TrainingViews, select_backend
from twinscan.recon.splats.backend import cpu_training_threads
from twinscan.recon.splats.trainer import _Run
from twinscan.recon.splats.views import observed_depths
from twinscan.runtime import init_runtime

TRIED_NORMAL_WEIGHT, TRIED_FLAT_WEIGHT = 0.05, 0.1  # the weights tried on the sample (off by default)


def random_views(num_gaussians: int, width: int, height: int, num_views: int = 9, seed: int = 0) -> TrainingViews:
    """Points spread in depth in front of cameras on a small arc: every pixel blends tens of splats."""
    rng = np.random.default_rng(seed)
    points = np.stack([rng.uniform(-2, 2, num_gaussians), rng.uniform(-1.2, 1.2, num_gaussians),
                       rng.uniform(2, 8, num_gaussians)], axis=1)
    colors = rng.uniform(0, 1, (num_gaussians, 3))
    focal = 0.8 * width
    K = torch.tensor([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1]], dtype=torch.float32)
    cam_from_world = torch.eye(4).repeat(num_views, 1, 1)
    for i in range(num_views):
        angle = math.radians(2 * (i - num_views // 2))
        cam_from_world[i, :3, :3] = torch.tensor([[math.cos(angle), 0, -math.sin(angle)], [0, 1, 0],
                                                  [math.sin(angle), 0, math.cos(angle)]])
        cam_from_world[i, 0, 3] = 0.05 * i
    images = [torch.rand(height, width, 3, generator=torch.Generator().manual_seed(i)) for i in range(num_views)]
    observed = [observed_depths(points, cam_from_world[i].numpy(), K.numpy(), width, height) for i in range(num_views)]
    return TrainingViews([f"{i:03d}.png" for i in range(num_views)], images, K[None].repeat(num_views, 1, 1),
                         cam_from_world, points, colors, observed)


def steps_per_second(num_gaussians: int, width: int, height: int, steps: int, sh_degree: int,
                     geometry_every: int | None = None, depth: bool = False) -> tuple[float, float]:
    """(it/s, ms/step); `geometry_every` None: without the geometric priors, else with them from the first
    step on, the normal pass every that many steps; `depth`: with the sparse depth loss (the default)."""
    views = random_views(num_gaussians, width, height)
    # no densification in the timed window: the splat count stays what the table says
    priors = {} if geometry_every is None else dict(normal_weight=TRIED_NORMAL_WEIGHT, flat_weight=TRIED_FLAT_WEIGHT,
                                                    geometry_from=0.0, geometry_every=geometry_every)
    cfg = SplatsConfig(steps=10 * steps, max_side=max(width, height), device="cpu", sh_degree=sh_degree,
                       sh_degree_interval=1, refine_start=10**9, refine_stop=10**9,
                       depth_weight=SplatsConfig.depth_weight if depth else 0.0, **priors)
    backend = select_backend("cpu")
    run = _Run(views, cfg, backend)
    with cpu_training_threads(backend.device):  # as train_splats runs it
        for _ in range(3):  # compile the numba kernels, warm the allocator
            run.train_step()
        started = time.perf_counter()
        for _ in range(steps):
            run.train_step()
        seconds = time.perf_counter() - started
    return steps / seconds, 1000 * seconds / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--size", type=int, nargs=2, default=[320, 180], metavar=("W", "H"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--sh-degree", type=int, default=3)
    args = parser.parse_args()
    table = Table(title=f"training step, CPU, {args.size[0]}x{args.size[1]}, SH degree {args.sh_degree}, "
                        f"numba threads {numba.get_num_threads()}")
    table.add_column("loss")
    for column in ("splats", "it/s", "ms/step", "time vs photometric", "goal"):
        table.add_column(column, justify="right")
    for count in args.gaussians:
        rate, ms = steps_per_second(count, *args.size, args.steps, args.sh_degree)
        table.add_row("photometric", f"{count:,}", f"{rate:.1f}", f"{ms:.1f}", "1.00",
                      ">= 15 it/s" if count == 10_000 else "")
        with_depth, ms_depth = steps_per_second(count, *args.size, args.steps, args.sh_degree, depth=True)
        table.add_row("+ sparse depth (the default)", f"{count:,}", f"{with_depth:.1f}", f"{ms_depth:.1f}",
                      f"{ms_depth / ms:.2f}", "")
        for every in (1, SplatsConfig().geometry_every):
            with_priors, ms_priors = steps_per_second(count, *args.size, args.steps, args.sh_degree, every)
            table.add_row(f"+ geometric priors, normal pass every {every}", f"{count:,}", f"{with_priors:.1f}",
                          f"{ms_priors:.1f}", f"{ms_priors / ms:.2f}", "")
    Console().print(table)


if __name__ == "__main__":
    init_runtime()  # as the CLI does, before torch or numba run
    main()
