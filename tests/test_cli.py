"""The command line as a technician meets it: stages listed, one-line errors, non-zero exits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from twinscan.cli.app import app
from twinscan.cli.errors import user_errors
from twinscan.errors import TwinscanError

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


BRACKETS = "cell [take 2] [/b]"  # rich markup would eat `[take 2]` and raise MarkupError on `[/b]`


def test_help_text_is_shown_as_written() -> None:
    result = runner.invoke(app, ["check", "--help"])
    assert result.exit_code == 0, result.output
    assert "twinscan[physics]" in result.output


def test_a_path_with_square_brackets_is_printed_as_written(tmp_path: Path) -> None:
    folder = tmp_path / BRACKETS
    folder.mkdir(parents=True)  # `[/b]` makes the folder `b]` inside `cell [take 2] [`
    video = folder / "cell [take 2].mp4"
    video.write_text("not a video\n")
    result = subprocess.run([sys.executable, "-m", "twinscan.cli.app", "capture", str(video), "-o",
                             str(tmp_path / "out [/b]"), "-q", "smoke"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: stage 'frames' failed: {video} cannot be read as a video"), lines[0]
    assert "Traceback" not in result.stderr and "MarkupError" not in result.stderr


def test_hints_and_warnings_keep_their_square_brackets(tmp_path: Path) -> None:
    from twinscan import optional
    from twinscan.workspace import Workspace

    with Workspace(tmp_path).run_stage("frames", {}, {}, {}) as run:
        run.warnings.append(f"{BRACKETS}.mp4: kept [1/2] frames")
    info = runner.invoke(app, ["info", str(tmp_path)])
    assert info.exit_code == 0, info.output
    assert f"warning (frames): {BRACKETS}.mp4: kept [1/2] frames" in info.output

    @user_errors
    def needs_ray() -> None:
        raise TwinscanError("the ray executor needs Ray", optional.RAY_HINT)

    cli = typer.Typer()
    cli.command()(needs_ray)
    result = runner.invoke(cli, [])
    assert result.exit_code == 2
    assert result.output.strip() == "error: the ray executor needs Ray -- pip install 'twinscan[ray]'"


def test_a_bad_option_is_refused_before_any_stage_runs(tmp_path: Path) -> None:
    """`--marker-size` is the sfm stage's, but it is checked before frames decodes anything."""
    video = Path(__file__).resolve().parent.parent / "samples" / "factory_cell" / "video.mp4"
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "twinscan.cli.app", "capture", str(video), "-o", str(out),
                             "-q", "smoke", "--marker-size", "-1"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["error: --marker-size must be positive (got -1.0) -- give the printed marker's black square "
                     "side in metres, e.g. 0.30"], result.stderr
    assert not (out / "frames").exists() and not (out / "manifest.json").exists()


def test_a_batch_with_a_bad_option_starts_no_capture(tmp_path: Path) -> None:
    import pytest

    from twinscan.batch import run_batch
    from twinscan.pipeline import CaptureOptions

    with pytest.raises(TwinscanError, match="--max-frames 1 is too few"):
        run_batch([tmp_path / "a.mp4"], tmp_path / "out", CaptureOptions(quality="smoke", max_frames=1))
    assert not (tmp_path / "out").exists()
