"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture_runs import Reference, reference_run
from twinscan.runtime import init_runtime


def pytest_configure(config: pytest.Config) -> None:
    init_runtime()  # the CLI's process-wide settings, before any test loads torch or runs a numba kernel


@pytest.fixture(scope="session")
def smoke_reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The tiny synthetic walkthrough through every stage at smoke quality (about two minutes on 2 cores), as a
    user runs it, watched from outside (capture_runs.reference_run; test_faults reads what was seen). One run
    for the whole suite: read it, or copy it to change it."""
    from twinscan.synth import PRESETS, make_capture

    root = tmp_path_factory.mktemp("smoke_capture")
    truth = make_capture(PRESETS["tiny"], root / "capture")
    return reference_run(truth.video_path, root)


@pytest.fixture(scope="session")
def smoke_capture(smoke_reference: Reference) -> Path:
    """The shared smoke run's workspace folder; the generator's capture lies beside it, in ../capture."""
    return smoke_reference.out
