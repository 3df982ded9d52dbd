"""Many captures in one command: each in its own workspace, isolated, retried, resumable.

`run_batch(videos, root, options, executor)` runs `twinscan.pipeline.run_capture` once per video under
ROOT/<stem>; an executor strategy (`LocalExecutor`, `RayExecutor`) decides where each attempt runs.
"""

from twinscan.batch.executors import Executor, LocalExecutor, RayExecutor
from twinscan.batch.jobs import CaptureJob, plan_jobs, read_captures
from twinscan.batch.run import BATCH_FILE, CaptureResult, key_figures, run_batch

__all__ = ["BATCH_FILE", "CaptureJob", "CaptureResult", "Executor", "LocalExecutor", "RayExecutor", "key_figures",
           "plan_jobs", "read_captures", "run_batch"]
