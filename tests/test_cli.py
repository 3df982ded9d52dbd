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


def test_usd_from_ply_writes_a_valid_twin_and_info_reads_it(tmp_path: Path) -> None:
    from test_gaussians import random_gaussians

    from twinscan.gaussians import write_ply
    from twinscan.usd_export import summarize, validation_errors

    ply = write_ply(tmp_path / "point_cloud.ply", random_gaussians(300, 3, seed=1))
    result = runner.invoke(app, ["usd", str(tmp_path / "out"), "--from-ply", str(ply)])
    assert result.exit_code == 0, result.output
    twin = tmp_path / "out" / "twin.usda"
    assert validation_errors(twin) == []
    assert summarize(twin)["splats"] == 300
    info = runner.invoke(app, ["info", str(twin)])
    assert info.exit_code == 0 and "300" in info.output


def test_usd_rejects_a_truncated_ply_in_one_line(tmp_path: Path) -> None:
    from test_gaussians import random_gaussians

    from twinscan.gaussians import write_ply

    ply = write_ply(tmp_path / "point_cloud.ply", random_gaussians(300, 3))
    ply.write_bytes(ply.read_bytes()[:-1000])
    result = runner.invoke(app, ["usd", str(tmp_path / "out"), "--from-ply", str(ply)])
    assert result.exit_code == 2
    assert not (tmp_path / "out" / "twin.usda").exists()


def test_info_tells_a_killed_stage_from_a_running_one(tmp_path: Path) -> None:
    """A stage recorded 'running' is running only while a process holds the workspace's lock."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from twinscan.workspace import Workspace\n"
         f"with Workspace({str(tmp_path)!r}).run_stage('frames', {{}}, {{}}, {{}}):\n"
         "    print('started', flush=True); time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "started"
        while_running = runner.invoke(app, ["info", str(tmp_path)], terminal_width=200)
    finally:
        holder.kill()
        holder.wait()
    after_kill = runner.invoke(app, ["info", str(tmp_path)], terminal_width=200)
    assert while_running.exit_code == after_kill.exit_code == 0
    assert "running" in while_running.output and "interrupted" not in while_running.output
    assert "interrupted" in after_kill.output and "resume" in after_kill.output, after_kill.output
