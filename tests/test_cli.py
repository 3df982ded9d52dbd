"""The command line as a technician meets it: stages listed, one-line errors, non-zero exits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from twinscan.cli.app import app

runner = CliRunner()


def test_help_lists_every_stage_and_an_example() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("capture", "frames", "sfm", "info"):
        assert command in result.output
    assert "twinscan capture walkthrough.mp4" in result.output


def test_missing_video_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "twinscan.cli.app", "capture", str(tmp_path / "nope.mp4"),
                             "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "does not exist" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_quality_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(app, ["capture", "x.mp4", "-o", str(tmp_path), "--quality", "ultra"])
    assert result.exit_code != 0


def test_info_on_a_folder_that_is_not_a_workspace(tmp_path: Path) -> None:
    result = runner.invoke(app, ["info", str(tmp_path)])
    assert result.exit_code == 2
