"""Synthetic capture speed: scene build, one render, one captured frame (all sub-frames, sensor, H.264).

Run: python benchmarks/bench_synth.py [--width 960 --height 540] [--workers N]. Times are on one core (OpenCV
threads off), except the last row's, on N processes (default: every core); CPU seconds are printed next to wall
seconds because shared machines inflate wall time.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
from rich.console import Console
from rich.table import Table

from twinscan.synth import CaptureConfig, build_scene, intrinsics, make_capture, render_frame
from twinscan.synth.render import CameraRays, render_radiance
from twinscan.synth.trajectory import Walkthrough


def timed(fn, repeats: int = 1) -> tuple[float, float]:
    """(wall, cpu) seconds per call."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - wall) / repeats, (time.process_time() - cpu) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--width", type=int, default=960)
    parser.add_argument("--height", type=int, default=540)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="processes for the parallel row")
    args = parser.parse_args()
    cv2.setNumThreads(1)
    w, h = args.width, args.height
    table = Table(title=f"twinscan.synth at {w}x{h}, one core")
    for column in ("what", "wall s", "cpu s"):
        table.add_column(column, justify="right" if column != "what" else "left")

    build_scene.cache_clear()
    table.add_row("build_scene (textures)", *(f"{t:.3f}" for t in timed(lambda: build_scene(0))))
    scene = build_scene(0)
    K = intrinsics(w, h, 65.0)
    poses = Walkthrough(20.0, seed=0).world_from_cam(np.linspace(0, 19, args.frames))
    rays = CameraRays.of(K, w, h)
    render_radiance(scene, K, poses[0], w, h, rays)  # compile the kernels
    it = iter(np.tile(poses, (4, 1, 1)))
    table.add_row("one render (1 ray/pixel)",
                  *(f"{t:.3f}" for t in timed(lambda: render_radiance(scene, K, next(it), w, h, rays), args.frames)))
    it = iter(np.tile(poses, (4, 1, 1)))
    table.add_row("render_frame (2x2 rays/pixel + depth)",
                  *(f"{t:.3f}" for t in timed(lambda: render_frame(scene, K, next(it), w, h), args.frames)))
    with tempfile.TemporaryDirectory() as tmp:
        cfg = CaptureConfig(width=w, height=h, fps=30.0 * args.frames / 600, duration_s=20.0)
        wall, cpu = timed(lambda: make_capture(cfg, Path(tmp) / "c"))
        n = cfg.frame_count()
        table.add_row(f"captured frame (make_capture, {n} frames)", f"{wall / n:.3f}", f"{cpu / n:.3f}")
        if args.workers > 1:  # the same video on several processes (each builds its own scene first)
            parallel, _ = timed(lambda: make_capture(cfg, Path(tmp) / "p", workers=args.workers))
            table.add_row(f"captured frame on {args.workers} processes ({wall / parallel:.2f}x one)",
                          f"{parallel / n:.3f}", "")
    sample = Path(__file__).resolve().parents[1] / "samples" / "factory_cell"
    if sample.exists():
        size = sum(p.stat().st_size for p in sample.iterdir()) / 1e6
        table.add_row("bundled sample size (MB)", f"{size:.2f}", "")
    Console().print(table)


if __name__ == "__main__":
    main()
