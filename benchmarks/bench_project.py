"""CPU projection + SH colours, forward + backward: the numba kernels vs gsplat's torch reference.

What a training step does before rasterizing: EWA projection of N Gaussians into one 320x180
camera (with the camera's gradient, as pose refinement needs) and degree-3 SH colours, then the
backward pass to means, quats, scales, SH coefficients and the camera. Times are medians; CPU ms
is the process CPU time per iteration, which other sessions sharing the cores inflate less than wall time.
Run: python benchmarks/bench_project.py [--counts 10000 50000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import os

import numba
import torch
from bench_raster import HEIGHT, WIDTH, benchmark_scene, median_seconds
from rich.console import Console
from rich.table import Table

from twinscan.gaussians.raster.project import colors_from_sh, project
from twinscan.runtime import init_runtime

SH_DEGREE = 3


def projection_step(params: list[torch.Tensor], viewmats: torch.Tensor, Ks: torch.Tensor, backend: str):
    means, quats, scales, opacities = params[:4]
    sh = torch.randn(len(means), (SH_DEGREE + 1) ** 2, 3, generator=torch.Generator().manual_seed(2))
    leaves = [t.clone().requires_grad_() for t in (means, quats, scales, opacities, sh, viewmats)]

    def step() -> None:
        screen = project(*leaves[:4], leaves[5], Ks, WIDTH, HEIGHT, backend=backend)
        colors = colors_from_sh(leaves[0], leaves[4], leaves[5], SH_DEGREE, backend=backend)
        loss = screen.means2d.sum() + screen.conics.sum() + screen.depths.sum() + screen.opacities.sum()
        (loss + colors.sum()).backward()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in training (splats.backend.cpu_training_threads)

    table = Table(title=f"CPU projection + SH degree {SH_DEGREE}, forward + backward, {os.cpu_count()} cores, "
                        f"load average {os.getloadavg()[0]:.1f} at start")
    for column in ("gaussians", "backend", "wall ms", "CPU ms", "speed-up (CPU)"):
        table.add_column(column, justify="right")
    for count in args.counts:
        params, viewmats, Ks = benchmark_scene(count)
        times = {backend: median_seconds(projection_step(params, viewmats, Ks, backend), args.repeats, warm_up=True)
                 for backend in ("numba", "torch")}
        for backend, (wall, cpu) in times.items():
            speed_up = f"{times['torch'][1] / cpu:.1f}x" if backend == "numba" else ""
            table.add_row(f"{count:,}", backend, f"{1e3 * wall:.1f}", f"{1e3 * cpu:.1f}", speed_up)
    Console(width=120).print(table)
    print(f"load average at end: {os.getloadavg()[0]:.1f}; {numba.get_num_threads()} numba threads, "
          f"{torch.get_num_threads()} torch thread")


if __name__ == "__main__":
    init_runtime()  # as the CLI does, before torch or numba run
    main()
