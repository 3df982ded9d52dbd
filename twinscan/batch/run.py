"""The batch driver: plan workspaces, run attempts through an executor, retry what is worth it,
and keep ROOT/batch.json current (one record per capture, with its workspace's key figures)."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twinscan import atomic
from twinscan.batch.attempt import Attempt, AttemptOutcome, log_path
from twinscan.batch.executors import Executor, LocalExecutor
from twinscan.batch.jobs import CaptureJob, plan_jobs
from twinscan.errors import TwinscanError
from twinscan.pipeline import CaptureOptions, stage_configs
from twinscan.layout import BATCH_JSON as BATCH_FILE
from twinscan.layout import STAGES, TWIN
from twinscan.workspace import Workspace

LOG_DIR = "logs"
FORMAT = "twinscan-batch"
VERSION = 1


def key_figures(workspace: Path) -> dict[str, Any]:
    """What a person compares across captures, read from the workspace manifest (None where a stage
    has not finished)."""
    try:
        stages = Workspace(workspace).manifest()["stages"]
    except TwinscanError:  # an unreadable manifest: the capture's own error says why
        stages = {}

    def figure(stage: str, key: str) -> Any:
        record = stages.get(stage) or {}
        return (record.get("figures") or {}).get(key) if record.get("status") == "done" else None

    usd_done = (stages.get("usd") or {}).get("status") == "done"
    collision_faces = figure("mesh", "collision_faces")
    if collision_faces is not None:  # every face that collides but the slab: the planar patches too
        collision_faces += figure("mesh", "planar_faces") or 0
    return {
        "stages_done": [name for name in STAGES if (stages.get(name) or {}).get("status") == "done"],
        "frames_kept": figure("frames", "kept"),
        "frames_registered": figure("sfm", "registered"),
        "scale_source": figure("sfm", "scale_source"),
        "splats": figure("splats", "num_gaussians"),
        "psnr": figure("splats", "psnr"),
        "collision_faces": collision_faces,
        "visual_faces": figure("mesh", "visual_faces"),
        "usd": str(workspace / TWIN) if usd_done else None,
        "check_verdict": figure("check", "verdict"),
    }


@dataclass
class CaptureResult:
    """One line of batch.json. `status`: pending (not finished yet), done or failed."""

    name: str
    video: str
    workspace: str
    log: str
    status: str = "pending"
    attempts: int = 0
    error: str | None = None
    seconds: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)


def _write_batch_file(root: Path, options: CaptureOptions, retries: int, executor: Executor,
                      results: Sequence[CaptureResult]) -> None:
    atomic.write_json(root / BATCH_FILE, {
        "format": FORMAT, "version": VERSION, "executor": repr(executor),
        "options": dataclasses.asdict(options), "retries": retries,
        "captures": [dataclasses.asdict(result) for result in results]})


def run_batch(videos: Sequence[Path], root: Path, options: CaptureOptions, executor: Executor = LocalExecutor(),
              retries: int = 1, on_result: Callable[[CaptureResult], None] | None = None) -> list[CaptureResult]:
    """Run every capture into ROOT/<stem> with the same options; returns one result per video, in order.

    A failure stays with its capture. A failure other than a TwinscanError (those are bad inputs and
    would fail again) is retried up to `retries` times; each retry, like a rerun of the whole batch,
    resumes the workspace and skips its finished stages.
    """
    if retries < 0:
        raise TwinscanError(f"--retries {retries} is negative", "use --retries 0 (no retries) or more")
    stage_configs(options)  # a bad option fails the batch now, not every capture after its first stages
    root = root.absolute()
    log_dir = root / LOG_DIR
    jobs = plan_jobs(videos, root)
    results = {job.name: CaptureResult(job.name, str(job.video), str(job.workspace), str(log_path(log_dir, job)))
               for job in jobs}
    ordered = [results[job.name] for job in jobs]
    with Workspace(root).locked():  # one batch per ROOT; each capture also locks its own workspace
        batch_file = root / BATCH_FILE
        before = batch_file.read_bytes() if batch_file.exists() else None
        _write_batch_file(root, options, retries, executor, ordered)
        finished = 0
        try:
            pending = deque(Attempt(job, 1) for job in jobs)
            for attempt, outcome in executor.run(pending, options, log_dir):
                result = results[attempt.job.name]
                result.attempts = attempt.number
                result.seconds = round(result.seconds + outcome.seconds, 3)
                if not outcome.ok and outcome.retryable and attempt.number <= retries:
                    pending.append(Attempt(attempt.job, attempt.number + 1))
                    continue
                _finish(result, attempt.job, outcome)
                finished += 1
                _write_batch_file(root, options, retries, executor, ordered)
                if on_result:
                    on_result(result)
        except BaseException:
            if not finished:  # the executor failed before any capture ended (e.g. no Ray cluster): as before
                _restore(batch_file, before)
            raise
    return ordered


def _restore(batch_file: Path, before: bytes | None) -> None:
    """Put ROOT/batch.json back as it was before this run: absent, or the previous run's record."""
    if before is None:
        batch_file.unlink(missing_ok=True)
    else:
        atomic.write_bytes(batch_file, before)


def _finish(result: CaptureResult, job: CaptureJob, outcome: AttemptOutcome) -> None:
    result.status = "done" if outcome.ok else "failed"
    result.error = outcome.error
    result.figures = key_figures(job.workspace)
