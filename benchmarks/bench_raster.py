"""CPU rasterization speed at 320x180: the numba kernel vs the tiled torch version, forward + backward.

The scene fills the view with Gaussians spread in depth (2-12 m, about 3 px across, opacity
0.2-0.8) so each pixel blends tens of them. "rasterization" is what gsplat's isect_tiles +
rasterize_to_pixels do: tile binning, blending and its backward to the screen-space splats;
"whole call" adds the projection (gsplat's torch EWA) and its backward to means, quats, scales,
opacities and colours. Times are medians; CPU ms is the process CPU time per iteration (both
threads), which other sessions sharing the cores cannot inflate as they do wall time.
Run: python benchmarks/bench_raster.py [--counts 10000 50000] [--torch-repeats 0 to skip torch]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from typing import Callable

import numba
import torch
from rich.console import Console
from rich.table import Table

from twinscan.gaussians.raster import rasterize
from twinscan.gaussians.raster.fast import rasterize_fast
from twinscan.gaussians.raster.project import ScreenGaussians, project
from twinscan.gaussians.raster.tiled import rasterize_tiled
from twinscan.gaussians.raster.tiles import bin_gaussians, bin_gaussians_fast
from twinscan.runtime import init_runtime

WIDTH, HEIGHT = 320, 180
FOCAL = 300.0


def benchmark_scene(n_gaussians: int, seed: int = 0) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """Gaussians uniform in the camera frustum at 2-12 m: means, quats, scales, opacities, colours."""
    gen = torch.Generator().manual_seed(seed)
    depth = 2.0 + 10.0 * torch.rand(n_gaussians, generator=gen)
    pixel = torch.rand(n_gaussians, 2, generator=gen) * torch.tensor([WIDTH, HEIGHT])
    xy = (pixel - torch.tensor([WIDTH / 2, HEIGHT / 2])) / FOCAL * depth[:, None]
    means = torch.cat([xy, depth[:, None]], dim=-1)
    quats = torch.randn(n_gaussians, 4, generator=gen)
    scales = depth[:, None] * (2.0 + 3.0 * torch.rand(n_gaussians, 3, generator=gen)) / FOCAL
    opacities = 0.2 + 0.6 * torch.rand(n_gaussians, generator=gen)
    colors = torch.rand(n_gaussians, 3, generator=gen)
    viewmats = torch.eye(4)[None]
    Ks = torch.tensor([[FOCAL, 0.0, WIDTH / 2], [0.0, FOCAL, HEIGHT / 2], [0.0, 0.0, 1.0]])[None]
    return [means, quats, scales, opacities, colors], viewmats, Ks


def median_seconds(step: Callable[[], None], repeats: int, warm_up: bool) -> tuple[float, float]:
    """Median wall-clock and process CPU seconds per call (CPU time is what other sessions can't inflate)."""
    if repeats == 0:
        return math.nan, math.nan
    if warm_up:
        step()  # numba loads its cached compilation
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def rasterization_step(screen: ScreenGaussians, colors: torch.Tensor, backend: str) -> Callable[[], None]:
    """Binning + blending + backward from screen-space splats, as gsplat's rasterize_to_pixels."""
    target = torch.rand(1, HEIGHT, WIDTH, 3, generator=torch.Generator().manual_seed(1))
    leaves = [t.detach().clone().requires_grad_() for t in (screen.means2d, screen.conics, screen.opacities, colors)]

    def step() -> None:
        splats = ScreenGaussians(leaves[0], leaves[1], screen.depths.detach(), leaves[2], screen.radii)
        if backend == "numba":
            bins = bin_gaussians_fast(splats.means2d, splats.radii, splats.depths, WIDTH, HEIGHT)
            rendered, alphas, _ = rasterize_fast(splats, leaves[3], WIDTH, HEIGHT, bins)
        else:
            bins = bin_gaussians(splats.means2d, splats.radii, splats.depths, WIDTH, HEIGHT)
            rendered, alphas, _ = rasterize_tiled(splats, leaves[3], WIDTH, HEIGHT, bins)
        ((rendered - target).abs().mean() + alphas.mean()).backward()

    return step


def whole_call_step(params: list[torch.Tensor], viewmats, Ks) -> Callable[[], None]:
    """`rasterize` (numba) from 3D Gaussians, backward to all their parameters."""
    target = torch.rand(1, HEIGHT, WIDTH, 3, generator=torch.Generator().manual_seed(1))
    leaves = [p.clone().requires_grad_() for p in params]

    def step() -> None:
        rendered, alphas, _ = rasterize(*leaves, viewmats, Ks, WIDTH, HEIGHT)
        ((rendered - target).abs().mean() + alphas.mean()).backward()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--repeats", type=int, default=15, help="timed iterations of the numba kernel")
    parser.add_argument("--torch-repeats", type=int, default=1, help="timed iterations of the torch version (0: skip)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch intra-op threads; the numba kernel does the parallel work, and torch's "
                             "spin-waiting OpenMP pool slows it down on 2 cores")
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)

    load = os.getloadavg()[0]
    table = Table(title=f"CPU rasterization forward + backward, {WIDTH}x{HEIGHT}, {os.cpu_count()} cores, "
                        f"load average {load:.1f} at start")
    for column in ("gaussians", "splats/tile", "rasterization", "wall ms", "it/s", "CPU ms", "speed-up",
                   "whole call: wall ms", "CPU ms"):
        table.add_column(column, justify="right")
    for count in args.counts:
        params, viewmats, Ks = benchmark_scene(count)
        with torch.no_grad():
            screen = project(*params[:4], viewmats, Ks, WIDTH, HEIGHT)
        colors = params[4][None]
        per_tile = len(bin_gaussians_fast(screen.means2d, screen.radii, screen.depths, WIDTH, HEIGHT).flatten_ids) / (
            (WIDTH // 16) * -(-HEIGHT // 16))
        numba_s, numba_cpu = median_seconds(rasterization_step(screen, colors, "numba"), args.repeats, warm_up=True)
        torch_s, torch_cpu = median_seconds(rasterization_step(screen, colors, "torch"), args.torch_repeats,
                                            warm_up=False)
        whole_s, whole_cpu = median_seconds(whole_call_step(params, viewmats, Ks), args.repeats, warm_up=True)
        table.add_row(f"{count:,}", f"{per_tile:.0f}", "numba", f"{1e3 * numba_s:.1f}", f"{1 / numba_s:.1f}",
                      f"{1e3 * numba_cpu:.1f}", "" if math.isnan(torch_cpu) else f"{torch_cpu / numba_cpu:.0f}x", f"{1e3 * whole_s:.1f}",
                      f"{1e3 * whole_cpu:.1f}")
        table.add_row("", "", "torch tiled", f"{1e3 * torch_s:.0f}", f"{1 / torch_s:.2f}", f"{1e3 * torch_cpu:.0f}",
                      "", "", "")
    Console(width=150).print(table)
    print(f"load average at end: {os.getloadavg()[0]:.1f}; numba threading layer {numba.threading_layer()}, "
          f"{numba.get_num_threads()} numba threads, {torch.get_num_threads()} torch threads")


if __name__ == "__main__":
    init_runtime()  # as the CLI does, before torch or numba run
    main()
