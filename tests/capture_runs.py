"""`twinscan capture` run as a user runs it, in a subprocess, and watched from outside through its manifest:
the suite's one shared smoke run (conftest.py) and test_faults' killed and resumed runs."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SMOKE = ["-q", "smoke", "--marker-size", "0.3"]
RUN_TIMEOUT_S = 900


def capture_env() -> dict[str, str]:
    """Wide enough that rich never wraps the one-line errors the tests read."""
    return {**os.environ, "COLUMNS": "200"}


def capture_command(video: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "twinscan.cli.app", "capture", str(video), "-o", str(out), *SMOKE]


def start_capture(video: Path, out: Path, log: Path, file_size_limit: int | None = None) -> subprocess.Popen:
    """`twinscan capture` in its own process group, everything it prints into `log`."""

    def limit_file_size() -> None:  # as `ulimit -f`: a write past the limit fails with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    with open(log, "w") as handle:
        return subprocess.Popen(capture_command(video, out), stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True, env=capture_env(),
                                preexec_fn=limit_file_size if file_size_limit else None)


def finish(process: subprocess.Popen, log: Path) -> str:
    try:
        process.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_group(process)
        pytest.fail(f"twinscan capture ran over {RUN_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
    return log.read_text()


def run_capture(video: Path, out: Path, log: Path, file_size_limit: int | None = None) -> tuple[int, str]:
    process = start_capture(video, out, log, file_size_limit)
    output = finish(process, log)
    return process.returncode, output


def kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def stopped(process: subprocess.Popen) -> Iterator[None]:
    """Freeze the run, so that what the workspace shows cannot change while it is read."""
    os.killpg(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(process.pid, signal.SIGCONT)


def read_manifest(out: Path) -> dict[str, Any]:
    """The manifest as on disk (it is replaced by rename, so never read half-written)."""
    try:
        return json.loads((out / "manifest.json").read_text())
    except FileNotFoundError:
        return {"stages": {}}


def started_anew(out: Path, stage: str, stale: dict[str, Any] | None) -> bool:
    """True while this run is inside `stage`: recorded running, and not the record of a killed run."""
    record = read_manifest(out)["stages"].get(stage)
    return record is not None and record["status"] == "running" and record != stale


@dataclass
class Reference:
    """One uninterrupted run, and what was seen from outside while it ran."""

    video: Path
    out: Path
    manifest: dict[str, Any]
    refused: subprocess.CompletedProcess  # a second run started on the workspace during sfm
    running_after_refusal: bool
    at_splats: Path  # the workspace copied the instant splats started


def reference_run(video: Path, root: Path) -> Reference:
    """`twinscan capture video -o root/out` to the end. While it is in sfm a second run on the same
    workspace is started (it must be refused), and the workspace is copied, the run frozen, the instant
    splats starts (what a kill there would leave). Neither touches what the run writes, so the suite
    shares this run as its finished smoke twin."""
    out, log = root / "out", root / "run.log"
    process = start_capture(video, out, log)
    try:
        while not started_anew(out, "sfm", None):
            assert process.poll() is None, log.read_text()
            time.sleep(0.01)
        refused = subprocess.run(capture_command(video, out), capture_output=True, text=True, timeout=300,
                                 env=capture_env())
        running_after_refusal = process.poll() is None
        while not started_anew(out, "splats", None):
            assert process.poll() is None, log.read_text()
            time.sleep(0.01)
        with stopped(process):
            assert read_manifest(out)["stages"]["splats"]["status"] == "running"
            shutil.copytree(out, root / "at_splats")
    except BaseException:
        kill_group(process)
        raise
    output = finish(process, log)
    assert process.returncode == 0, output
    return Reference(video, out, read_manifest(out), refused, running_after_refusal, root / "at_splats")
