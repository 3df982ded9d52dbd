"""Shared fixtures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from twinscan.runtime import init_runtime


def pytest_configure(config: pytest.Config) -> None:
    init_runtime()  # the CLI's process-wide settings, before any test loads torch or runs a numba kernel


@pytest.fixture(scope="session")
def smoke_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny synthetic walkthrough through every stage at smoke quality (about a minute on 2 cores),
    as a user runs it; the workspace folder."""
    from twinscan.synth import PRESETS, make_capture

    root = tmp_path_factory.mktemp("smoke_capture")
    truth = make_capture(PRESETS["tiny"], root / "capture")
    subprocess.run([sys.executable, "-m", "twinscan.cli.app", "capture", str(truth.video_path), "-o", str(root / "out"),
                    "-q", "smoke", "--marker-size", "0.3"], check=True, capture_output=True, timeout=900)
    return root / "out"
