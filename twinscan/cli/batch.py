"""`twinscan batch`: many captures, one workspace each, locally or on a Ray cluster."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from twinscan.batch import BATCH_FILE, CaptureResult, LocalExecutor, RayExecutor, read_captures, run_batch
from twinscan.batch.run import LOG_DIR
from twinscan.cli.options import (Convex, Device, DeviceChoice, Force, Half, Mapper, MapperChoice, MarkerDict, MarkerSize,
                              MaxFrames, Quality, QualityChoice, Scale, Usdz)
from twinscan.cli.errors import user_errors
from twinscan.figures import format_figure
from twinscan.errors import TwinscanError
from twinscan.pipeline import CaptureOptions
from twinscan.progress import console, progress_bar, say, styled


class ExecutorChoice(str, Enum):
    local = "local"
    ray = "ray"


_FIGURE_COLUMNS = {"frames_kept": "kept", "frames_registered": "posed", "scale_source": "scale", "splats": "splats",
                   "psnr": "PSNR", "collision_faces": "faces"}


def print_batch_summary(results: list[CaptureResult], root: Path) -> None:
    """One row per capture with its key figures; each failure's one-line error below the table."""
    table = Table(title=styled(f"twinscan batch {root}"))
    for column in ("capture", "status", "tries", "seconds", *_FIGURE_COLUMNS.values()):
        table.add_column(column, no_wrap=column in ("capture", "status"))
    for result in results:
        style = "green" if result.status == "done" else "red"
        figures = [result.figures.get(key) for key in _FIGURE_COLUMNS]
        table.add_row(styled(result.name), styled((result.status, style)), str(result.attempts), f"{result.seconds:.0f}",
                      *("" if value is None else format_figure(value, key) for key, value in zip(_FIGURE_COLUMNS, figures)))
    console.print(table)
    for result in results:
        if result.error:
            say((result.name, "red"), f": {result.error}")
    failed = sum(result.status != "done" for result in results)
    verdict = (f"{failed} of {len(results)} failed", "bold red") if failed else (f"all {len(results)} done", "bold green")
    say(verdict, f" -> {root / BATCH_FILE} (logs in {root / LOG_DIR})")


@user_errors
def batch(captures: Annotated[list[Path], typer.Argument(
              help="Walkthrough videos, or .txt manifests listing one video path per line (# comments; "
                   "relative paths are relative to the manifest).")],
          out: Annotated[Path, typer.Option("--out", "-o", help="Batch folder: one workspace per capture, "
                                            "ROOT/<video stem>, plus ROOT/batch.json and ROOT/logs/.")],
          executor: Annotated[ExecutorChoice, typer.Option(
              help="local: on this machine, one capture per GPU (else one at a time); ray: each capture a Ray task.")]
          = ExecutorChoice.local,
          address: Annotated[Optional[str], typer.Option(
              help="With --executor ray: the cluster to join (e.g. 10.0.0.5:6379, from `ray start --head`); "
                   "without it a local Ray instance is started.")] = None,
          workers: Annotated[Optional[int], typer.Option(
              help="With --executor local: captures at a time (default: one per GPU, else 1).")] = None,
          cpus_per_capture: Annotated[int, typer.Option(
              help="With --executor ray: CPUs (and threads) each capture's task asks for.")] = 1,
          retries: Annotated[int, typer.Option(
              help="Retries of a capture that crashed; bad inputs (twinscan errors) are not retried.")] = 1,
          quality: Quality = QualityChoice.auto, device: Device = DeviceChoice.auto, force: Force = False,
          max_frames: MaxFrames = None, mapper: Mapper = MapperChoice.incremental, marker_size: MarkerSize = None,
          marker_dict: MarkerDict = "4x4_50", scale: Scale = None, convex: Convex = False, usdz: Usdz = False,
          half: Half = False) -> None:
    """Run `capture` on many videos with the same options, each in its own workspace ROOT/<video stem>.

    A failed capture does not stop the others; the exit code is 1 when any failed.
    Re-running the same command resumes: finished captures and stages are skipped.
    ROOT/batch.json records each capture's status, attempts, error and key figures.

    Example: twinscan batch cell_a.mp4 cell_b.mp4 -o twins --marker-size 0.30
             twinscan batch videos.txt -o twins --executor ray --address 10.0.0.5:6379
    """
    if address is not None and executor is not ExecutorChoice.ray:
        raise TwinscanError("--address only goes with --executor ray", "add --executor ray, or drop --address")
    if workers is not None and executor is not ExecutorChoice.local:
        raise TwinscanError("--workers only goes with --executor local",
                            "drop --workers (Ray places tasks itself; see --cpus-per-capture)")
    options = CaptureOptions(quality=quality.value, device=device.value, force=force, max_frames=max_frames,
                             mapper=mapper.value, marker_size=marker_size, marker_dict=marker_dict, scale=scale,
                             convex=convex, usdz=usdz, half=half)
    chosen = (RayExecutor(address=address, cpus_per_capture=cpus_per_capture) if executor is ExecutorChoice.ray
              else LocalExecutor(workers=workers))
    videos = read_captures(captures)
    with progress_bar("batch", len(videos)) as advance:
        results = run_batch(videos, out, options, chosen, retries=retries,
                            on_result=lambda result: advance(status=f"{result.name}: {result.status}"))
    print_batch_summary(results, out.absolute())
    if any(result.status != "done" for result in results):
        raise typer.Exit(1)
