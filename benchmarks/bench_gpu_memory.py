"""Peak GPU memory of splat training (gsplat, MCMC), measured on smaller runs and extrapolated to the
`high` preset on a 5-minute 1080p walkthrough.

    python benchmarks/bench_gpu_memory.py [--gaussians 250000 1000000] [--sizes 960x540 1920x1080] [--steps 100]

On CUDA: the splats stage's own training step (`_Run.train_step`: projection, SH degree 3, rasterization
forward and backward, loss, Adam, MCMC relocation every 20 steps) on random views (bench_train_step's,
splats spread in depth so every pixel blends tens of them: more overlap than a real cell, so the figure
errs high), at each (Gaussians, size) pair; torch.cuda.max_memory_allocated over the run is the peak.
The peaks are fitted with a + b*N + c*P + d*N*P (N Gaussians, P pixels: parameters and optimiser state
grow with N, image buffers with P, tile intersections with both) and the fit is read at `standard` and
`high`. GPU memory does not grow with the frame count: the trainer moves one image to the GPU a step
and keeps the rest, as float32, in host memory, which is printed for the 5-minute walkthrough too.

On the CPU it says it needs CUDA, prints the lower bound that the model sizes alone give (labelled an
estimate, not a measurement) and exits 0.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from twinscan.presets import PRESETS

PARAM_FLOATS = 3 + 3 + 4 + 1 + 16 * 3  # means, log scales, quaternions, opacity logit, SH degree 3
COPIES = 4  # the parameter, its gradient and Adam's two moments
console = Console()


def size_of(text: str) -> tuple[int, int]:
    width, height = (int(v) for v in text.lower().split("x"))
    return width, height


def preset_point(name: str) -> tuple[int, int, int]:
    """(Gaussians, width, height) a preset trains at on 16:9 1080p frames."""
    preset = PRESETS[name]
    width = min(preset.max_side, 1920)
    return preset.max_gaussians, width, width * 9 // 16


def host_bytes(name: str) -> int:
    """Training images held in host memory (float32 RGB) when a walk fills the preset's frame budget, as a
    5-minute walkthrough fills high's (600 frames, 2 a second)."""
    _, width, height = preset_point(name)
    return PRESETS[name].max_frames * width * height * 3 * 4


def model_bytes(gaussians: int) -> int:
    return gaussians * PARAM_FLOATS * 4 * COPIES


def measure_peak(gaussians: int, width: int, height: int, steps: int) -> int:
    """Peak bytes allocated on the GPU over `steps` training steps at this size (MCMC at its cap)."""
    from bench_train_step import random_views

    from twinscan.recon.splats import SplatsConfig, select_backend
    from twinscan.recon.splats.trainer import _Run

    views = random_views(gaussians, width, height)
    cfg = SplatsConfig(steps=10 * steps, max_side=max(width, height), device="cuda", max_gaussians=gaussians,
                       sh_degree=3, sh_degree_interval=1, refine_start=10, refine_every=20)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    run = _Run(views, cfg, select_backend("cuda"))
    for _ in range(steps):
        run.train_step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del run
    torch.cuda.empty_cache()
    return peak


def fit(points: list[tuple[int, int, int]]) -> np.ndarray:
    """Least-squares coefficients of peak = a + b*N + c*P + d*N*P over (N, P, peak) points."""
    design = np.array([[1.0, n, p, n * p] for n, p, _ in points])
    return np.linalg.lstsq(design, np.array([peak for _, _, peak in points], dtype=float), rcond=None)[0]


def predict(coefficients: np.ndarray, gaussians: int, pixels: int) -> float:
    return float(coefficients @ [1.0, gaussians, pixels, gaussians * pixels])


def gib(value: float) -> str:
    return f"{value / 2**30:.2f}"


def cpu_estimate() -> None:
    console.print("bench_gpu_memory: needs a CUDA GPU (torch sees none); nothing was measured.")
    table = Table(title="ESTIMATE from model sizes alone (not a measurement; a lower bound: rasterization "
                        "buffers and tile intersections are not counted)")
    for column in ("preset", "Gaussians", "training size", "parameters + grads + Adam, GiB",
                   "host images at the frame budget, GiB"):
        table.add_column(column, justify="right")
    for name in ("standard", "high"):
        gaussians, width, height = preset_point(name)
        table.add_row(name, f"{gaussians:,}", f"{width}x{height}", gib(model_bytes(gaussians)), gib(host_bytes(name)))
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--sizes", nargs="+", default=["960x540", "1920x1080"])
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    if len(set(args.gaussians)) < 2 or len(set(args.sizes)) < 2:
        parser.error("give at least two Gaussian counts and two sizes: the fit has four coefficients")
    if not torch.cuda.is_available():
        cpu_estimate()
        return
    points = []
    table = Table(title=f"peak GPU memory of splat training, {torch.cuda.get_device_name()}, {args.steps} steps")
    for column in ("what", "Gaussians", "size", "peak GiB"):
        table.add_column(column, justify="right")
    for gaussians in args.gaussians:
        for text in args.sizes:
            width, height = size_of(text)
            peak = measure_peak(gaussians, width, height, args.steps)
            points.append((gaussians, width * height, peak))
            table.add_row("measured", f"{gaussians:,}", f"{width}x{height}", gib(peak))
    coefficients = fit(points)
    for name in ("standard", "high"):
        gaussians, width, height = preset_point(name)
        table.add_row(f"{name}: extrapolated", f"{gaussians:,}", f"{width}x{height}",
                      gib(predict(coefficients, gaussians, width * height)))
    console.print(table)
    console.print(f"high on a 5-minute 1080p walkthrough ({PRESETS['high'].max_frames} frames): training images in "
                  f"host memory {gib(host_bytes('high'))} GiB (float32; computed, not measured)")


if __name__ == "__main__":
    sys.exit(main())
