"""One attempt at one capture, as a worker process runs it (a local child or a Ray task).

Kept free of heavy imports: the worker sets its thread counts before torch and numba load.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from twinscan.batch.jobs import CaptureJob
from twinscan.errors import TwinscanError
from twinscan.pipeline import CaptureOptions, run_capture
from twinscan.runtime import init_runtime


@dataclass(frozen=True)
class Attempt:
    job: CaptureJob
    number: int  # 1 for the first try


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt ended. A TwinscanError (bad input, failed check) would fail again: not retryable."""

    ok: bool
    seconds: float
    error: str | None = None
    retryable: bool = False

    @classmethod
    def crashed(cls, reason: str, seconds: float) -> AttemptOutcome:
        """The worker died (killed, out of memory, node lost): worth another try, which resumes."""
        return cls(ok=False, seconds=seconds, error=reason, retryable=True)


def worker_env(threads: int) -> dict[str, str]:
    """Environment for a worker that shares the machine: torch (OpenMP) and numba each get `threads`,
    and idle OpenMP workers sleep instead of spinning (see twinscan/cli/app.py). Read at import,
    so it must be in place before the worker imports torch or numba."""
    return {"OMP_NUM_THREADS": str(threads), "NUMBA_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE"}


def log_path(log_dir: Path, job: CaptureJob) -> Path:
    return log_dir / f"{job.name}.log"


@contextlib.contextmanager
def output_to(log: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors, so native libraries too) to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "a") as file:
        os.dup2(file.fileno(), 1)
        os.dup2(file.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def run_attempt(attempt: Attempt, options: CaptureOptions, log_dir: Path) -> AttemptOutcome:
    """Run (or resume) the capture; its progress output goes to LOG_DIR/<name>.log."""
    init_runtime()  # a worker process (or Ray task) is an entry point of its own
    started = time.time()
    with output_to(log_path(log_dir, attempt.job)):
        print(f"--- {attempt.job.video} -> {attempt.job.workspace}, attempt {attempt.number}", flush=True)
        try:
            run_capture(attempt.job.video, attempt.job.workspace, options)
        except TwinscanError as error:
            print(f"error: {error.one_line()}", flush=True)
            return AttemptOutcome(ok=False, seconds=time.time() - started, error=error.one_line())
        except Exception as error:  # a bug or a flaky backend: logged in full, retried
            traceback.print_exc()
            return AttemptOutcome(ok=False, seconds=time.time() - started, retryable=True,
                                  error=f"{type(error).__name__}: {error}".splitlines()[0])
    return AttemptOutcome(ok=True, seconds=time.time() - started)
