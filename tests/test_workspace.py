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


def _try_to_lock(folder: Path) -> str:
    """A script that takes the workspace lock in another process and prints what happened."""
    return textwrap.dedent(f"""
        from twinscan.workspace import Workspace
        from twinscan.errors import TwinscanError
        try:
            with Workspace({str(folder)!r}).locked():
                print("acquired")
        except TwinscanError as error:
            print(error.one_line())
    """)


def test_second_process_on_the_same_workspace_is_refused(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    script = _try_to_lock(tmp_path)
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


def test_the_lock_file_exists_only_while_a_run_holds_the_workspace(tmp_path: Path) -> None:
    from twinscan.layout import LOCK

    ws = Workspace(tmp_path)
    _finish_stage(ws, {"a": 1}, {"video": "x"})
    assert not (tmp_path / LOCK).exists()  # a finished run: nothing left to travel with a copied folder
    with pytest.raises(RuntimeError):
        with ws.run_stage("sfm", {}, {}, versions={}):
            assert (tmp_path / LOCK).read_text() == f"{os.getpid()}\n"
            raise RuntimeError("the stage failed")
    assert not (tmp_path / LOCK).exists()  # a failed one neither
    assert ws.stage_record("sfm")["status"] == "failed" and not ws.in_use()
    assert not (tmp_path / LOCK).exists()  # asking whether it is in use does not make one


def test_a_process_waiting_on_a_released_lock_file_does_not_share_the_workspace(tmp_path: Path) -> None:
    """The race removal opens: B opened the lock file before A removed it and locks it after; C makes a
    new file meanwhile. Only one of B and C may hold the workspace."""
    import fcntl

    from twinscan.layout import LOCK
    from twinscan.workspace import _still_at, _take_lock

    with Workspace(tmp_path).locked():  # A
        waiting = open(tmp_path / LOCK, "a+")  # B opens the file while A holds the workspace
        assert _still_at(tmp_path / LOCK, waiting)
    # A released: removed the file, then unlocked. B's flock now succeeds, on a file no longer at the path:
    fcntl.flock(waiting, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert not _still_at(tmp_path / LOCK, waiting)  # so B's take starts again instead of proceeding
    holder = _take_lock(tmp_path / LOCK)  # C makes a new file and holds it
    assert holder is not None and _still_at(tmp_path / LOCK, holder)
    assert not _still_at(tmp_path / LOCK, waiting)  # B, looking again, finds C's file, not its own
    fcntl.flock(waiting, fcntl.LOCK_UN)
    waiting.close()
    script = _try_to_lock(tmp_path)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "another twinscan run is using" in result.stdout  # C holds the file at the path
    holder.close()


def test_a_batch_leaves_no_lock_and_a_failed_one_no_batch_file(tmp_path: Path) -> None:
    from twinscan.batch import BATCH_FILE, LocalExecutor, run_batch
    from twinscan.pipeline import CaptureOptions
    from twinscan.layout import LOCK

    options = CaptureOptions(quality="smoke")
    root = tmp_path / "twins"
    results = run_batch([tmp_path / "missing.mp4"], root, options, LocalExecutor(workers=1), retries=0)
    assert [(r.status, r.error) for r in results] == [("failed", f"{tmp_path / 'missing.mp4'} does not exist -- "
                                                                 "check the path to the walkthrough video")]
    assert sorted(p.name for p in root.iterdir()) == [BATCH_FILE, "logs"]  # no .twinscan.lock
    record = (root / BATCH_FILE).read_bytes()

    with pytest.raises(TwinscanError, match="--workers 0 runs nothing"):  # the executor fails before any capture
        run_batch([tmp_path / "missing.mp4"], root, options, LocalExecutor(workers=0))
    assert (root / BATCH_FILE).read_bytes() == record and not (root / LOCK).exists()  # as it was
    with pytest.raises(TwinscanError, match="--workers 0 runs nothing"):
        run_batch([tmp_path / "missing.mp4"], tmp_path / "new", options, LocalExecutor(workers=0))
    assert list((tmp_path / "new").iterdir()) == []  # neither batch.json nor the lock


def test_each_workspace_path_is_spelled_once_in_the_package() -> None:
    """twinscan.layout owns every path under OUT/ and the stage order: no other module spells one."""
    from twinscan import layout

    package = Path(layout.__file__).parent
    sources = {path: path.read_text() for path in package.rglob("*.py") if path != Path(layout.__file__)}
    paths = [value for name, value in vars(layout).items()
             if name.isupper() and isinstance(value, str) and ("/" in value or "." in value)]
    assert len(paths) >= 25 and layout.TWIN in paths and layout.SPLATS_PLY in paths
    literals = {f'"{path}"' for path in paths} | {f'"{Path(path).name}"' for path in paths if "." in Path(path).name}
    literals |= {f'"{folder}/' for folder in (layout.FRAMES_DIR, layout.SFM_DIR, layout.SPLATS_DIR, layout.MESH_DIR,
                                              layout.CHECK_DIR)}  # a path built by hand: "mesh/" + name
    literals.add(repr(layout.STAGES[:3])[:-1])  # the stage order written out again
    spelled = sorted(f"{path.relative_to(package)}: {literal}" for path, text in sources.items()
                     for literal in literals if literal in text)
    assert spelled == []
    assert layout.inside(layout.MESH_DIR, layout.COLLISION) == "collision.obj"


def test_execute_skips_a_finished_stage_and_reruns_one_without_a_required_output(tmp_path: Path) -> None:
    """The one stage runner: a stage done with the same config and inputs is skipped (`ran` False, its
    recorded figures); one whose required output is gone (a workspace from before that output) runs again."""
    from twinscan.stages import execute

    class Counting:
        name, versions, required = "frames", (), ("needed.txt",)
        runs = 0

        def inputs(self, ws: Workspace) -> dict[str, str]:
            return {"video": "abc"}

        def run(self, ws: Workspace, config: dict, run, force: bool) -> None:
            Counting.runs += 1
            atomic.write_bytes(ws.path("needed.txt"), b"x")
            atomic.write_bytes(ws.path("recorded.txt"), b"x")
            run.outputs.append("recorded.txt")
            run.figures["runs"] = Counting.runs

    ws = Workspace(tmp_path)
    first = execute(Counting(), ws, {"n": 1})
    assert first.ran and first.figures == {"runs": 1}
    again = execute(Counting(), ws, {"n": 1})
    assert not again.ran and again.figures == {"runs": 1}
    assert execute(Counting(), ws, {"n": 2}).ran  # another config
    (tmp_path / "needed.txt").unlink()
    assert execute(Counting(), ws, {"n": 2}).figures == {"runs": 3}
    assert not execute(Counting(), ws, {"n": 2}).ran
