"""`render_dataset`: plan the views, render the frames not yet on disk (here or on Ray workers), then write
transforms.json and the run's record."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from twinscan import atomic
from twinscan.errors import TwinscanError
from twinscan.render import dataset
from twinscan.render.cameras import plan_views
from twinscan.render.config import RenderConfig
from twinscan.gaussians.backend import select_render_backend
from twinscan.render.frame import render_frame
from twinscan.render.twin import RenderTwin, load_render_twin
from twinscan.workspace import tool_versions

FRAMES_PER_TASK = 8  # a Ray task's share: small enough for progress, large enough to pay for loading the twin


def render_frames(twin_root: Path, folder: Path, indices: list[int], device: str,
                  advance: Callable[[int], None] = lambda n: None, twin: RenderTwin | None = None) -> int:
    """Render and write the frames `indices` of the planned dataset in `folder`; returns how many."""
    import json

    plan = json.loads((folder / dataset.RECORD).read_text())
    config = RenderConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in plan["config"].items()})
    twin = twin or load_render_twin(twin_root)
    backend = select_render_backend(device, notice="rendering splats")
    for index in indices:
        view = dataset.view_from_record(plan["views"][index])
        images, randomization = render_frame(twin, backend, view, config, index)
        dataset.write_frame(folder, index, view, images, randomization)
        advance(1)
    return len(indices)


def _ray_task(twin_root: Path, folder: Path, indices: list[int], device: str) -> int:
    """A Ray worker is an entry point of its own: its runtime settings first, then the frames."""
    from twinscan.runtime import init_runtime

    init_runtime()
    return render_frames(twin_root, folder, indices, device)


def _render_on_ray(twin_root: Path, folder: Path, pending: list[int], device: str, workers: int,
                   address: str | None, advance: Callable[[int], None]) -> None:
    """Tasks of FRAMES_PER_TASK frames on Ray: `workers` local ones, or a cluster's (every node needs the
    twin and the dataset folder at the same paths: a shared filesystem)."""
    from twinscan import optional
    from twinscan.batch.executors import connect_ray

    ray = optional.ray()
    started_here = not ray.is_initialized()
    if started_here:
        connect_ray(ray, address, num_cpus=workers)
    try:
        task = ray.remote(_ray_task).options(num_gpus=1 if device == "cuda" else 0)
        running = [task.remote(twin_root, folder, pending[i:i + FRAMES_PER_TASK], device)
                   for i in range(0, len(pending), FRAMES_PER_TASK)]
        while running:
            done, running = ray.wait(running, num_returns=1)
            advance(ray.get(done[0]))
    finally:
        if started_here:
            ray.shutdown()


def render_dataset(twin_root: Path, folder: Path, config: RenderConfig, device: str = "auto", workers: int = 1,
                   address: str | None = None, force: bool = False,
                   progress: Callable[[int], Any] | None = None) -> dict[str, Any]:
    """Render the dataset (resuming one left unfinished); returns its figures. `progress(total)` returns the
    `advance(n)` callback of a progress bar."""
    config.validate()
    if workers < 1:
        raise TwinscanError(f"--workers {workers} renders nothing", "give --workers 1 or more")
    started = time.perf_counter()
    twin = load_render_twin(twin_root)
    folder = Path(folder)
    plan = dataset.open_dataset(folder, config, twin.inputs, force)
    resumed = plan is not None
    if plan is None:
        views = plan_views(twin, config)
        plan = dataset.plan_record(config, twin.inputs, views, twin.part_count)
        folder.mkdir(parents=True, exist_ok=True)
        dataset.write_plan(folder, plan)
    planned = time.perf_counter()
    count = len(plan["views"])
    pending = sorted(set(range(count)) - dataset.done_frames(folder, count))
    advance = progress(count) if progress is not None else (lambda n=1: None)
    advance(count - len(pending))
    if (workers > 1 or address is not None) and pending:
        _render_on_ray(twin.root, folder, pending, device, workers, address, advance)
    else:
        render_frames(twin.root, folder, pending, device, advance, twin=twin)
    rendered = time.perf_counter()
    content = dataset.write_transforms(folder, count, twin.part_count)
    figures = _figures(folder, content, len(pending), resumed)
    figures["seconds"] = {"plan": round(planned - started, 2), "render": round(rendered - planned, 2),
                          "total": round(time.perf_counter() - started, 2)}
    figures["views_per_second"] = round(len(pending) / max(rendered - planned, 1e-9), 3) if pending else None
    plan["run"] = {"figures": figures, "device": device, "workers": workers,
                   "versions": tool_versions("torch", "gsplat", "open3d", "pycolmap", "numpy")}
    atomic.write_json(folder / dataset.RECORD, plan)
    return figures


def _figures(folder: Path, content: dict[str, Any], rendered: int, resumed: bool) -> dict[str, Any]:
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    frames = content["frames"]
    return {"views": len(frames), "rendered": rendered, "resumed": resumed,
            "dataset_bytes": size, "bytes_per_1000_views": int(size / max(len(frames), 1) * 1000),
            "sources": sorted({frame["source"].split(":")[0] for frame in frames}),
            "distractors": int(np.sum([len(f["randomization"]["distractors"]) for f in frames])),
            "depth_agreed": round(float(np.mean([f["depth_agreed"] for f in frames])), 4) if frames else None}
