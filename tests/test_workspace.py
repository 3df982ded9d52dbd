"""The workspace contract: resume, failure records, the lock, and files that are complete or absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from twinscan import atomic
from twinscan.errors import TwinscanError
from twinscan.workspace import Workspace, fingerprint


def _finish_stage(ws: Workspace, params: dict, inputs: dict) -> None:
    with ws.run_stage("frames", params, inputs, versions={}) as run:
        atomic.write_bytes(ws.path("frames.json"), b"[]")
        run.outputs.append("frames.json")
        run.figures["kept"] = 3


def test_finished_stage_is_skipped_only_while_params_inputs_and_outputs_are_unchanged(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    _finish_stage(ws, {"max_frames": 60}, {"video": "abc"})
    assert ws.is_done("frames", {"max_frames": 60}, {"video": "abc"})
    assert not ws.is_done("frames", {"max_frames": 61}, {"video": "abc"})
    assert not ws.is_done("frames", {"max_frames": 60}, {"video": "abd"})
    (tmp_path / "frames.json").unlink()
    assert not ws.is_done("frames", {"max_frames": 60}, {"video": "abc"})
    record = ws.stage_record("frames")
    assert record["status"] == "done" and record["figures"] == {"kept": 3}
    assert record["seconds"] >= 0 and record["started"] <= record["finished"]


def test_failed_stage_is_recorded_with_its_reason_and_not_trusted(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    with pytest.raises(TwinscanError):
        with ws.run_stage("sfm", {}, {}, versions={}):
            raise TwinscanError("only 3 of 40 frames registered", "walk slower")
    record = ws.stage_record("sfm")
    assert record["status"] == "failed"
    assert record["error"] == "only 3 of 40 frames registered -- walk slower"
    assert not ws.is_done("sfm", {}, {})


def test_fingerprint_follows_content_not_timestamps(tmp_path: Path) -> None:
    folder = tmp_path / "frames"
    folder.mkdir()
    (folder / "a.jpg").write_bytes(b"one")
    before = fingerprint(folder)
    os.utime(folder / "a.jpg", (0, 0))
    assert fingerprint(folder) == before
    (folder / "a.jpg").write_bytes(b"two")
    assert fingerprint(folder) != before


def test_atomic_dir_leaves_nothing_when_the_writer_fails(tmp_path: Path) -> None:
    target = tmp_path / "frames"
    with pytest.raises(RuntimeError):
        with atomic.atomic_dir(target) as tmp:
            (tmp / "000001.jpg").write_bytes(b"x")
            raise RuntimeError("crash half way")
    assert list(tmp_path.iterdir()) == []


def test_atomic_dir_replaces_an_old_folder_whole(tmp_path: Path) -> None:
    target = tmp_path / "frames"
    target.mkdir()
    (target / "stale.jpg").write_bytes(b"old")
    with atomic.atomic_dir(target) as tmp:
        (tmp / "new.jpg").write_bytes(b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames"]
    assert [p.name for p in target.iterdir()] == ["new.jpg"]


def test_full_disk_gives_a_clear_error_and_no_partial_file(tmp_path: Path) -> None:
    """`ulimit -f` makes writes fail as on a full disk (EFBIG); the target must not appear."""
    script = textwrap.dedent(f"""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        from twinscan import atomic
        from twinscan.errors import TwinscanError
        try:
            atomic.write_bytes({str(tmp_path / "big.bin")!r}, b"x" * 100_000)
        except TwinscanError as error:
            print(error.one_line())
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "could not write" in result.stdout and "free disk space" in result.stdout, result
    assert list(tmp_path.iterdir()) == []


def test_second_process_on_the_same_workspace_is_refused(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    script = textwrap.dedent(f"""
        from twinscan.workspace import Workspace
        from twinscan.errors import TwinscanError
        try:
            with Workspace({str(tmp_path)!r}).locked():
                print("acquired")
        except TwinscanError as error:
            print(error.one_line())
    """)
    with ws.locked():
        with ws.locked():  # re-entrant in the same process
            result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "another twinscan run is using" in result.stdout
    after = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert after.stdout.strip() == "acquired"


def test_corrupt_manifest_is_reported_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(TwinscanError, match="not valid JSON"):
        Workspace(tmp_path).manifest()
    assert (tmp_path / "manifest.json").read_text() == "{not json"


def test_manifest_is_plain_json_with_versions(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    with ws.run_stage("frames", {"a": 1}, {"video": "x"}, versions={"twinscan": "0.1.0"}) as run:
        run.warnings.append("scale: arbitrary")
    data = json.loads((tmp_path / "manifest.json").read_text())
    assert data["stages"]["frames"]["versions"] == {"twinscan": "0.1.0"}
    assert data["stages"]["frames"]["warnings"] == ["scale: arbitrary"]
