"""A capture survives what real runs meet: SIGKILL inside any stage, writes that fail as on a full disk,
and a second run started on the same workspace.

Every run is the real `twinscan capture` in a subprocess, on the tiny synthetic capture at `-q smoke`.
One uninterrupted reference run is shared: while it runs, a second run on its workspace must be
refused, and its workspace is copied at the instant splats starts (what a kill there would leave).
From that copy one chain of runs is killed in splats, mesh, usd and check in turn, each run resuming
the last; a fresh workspace is killed in frames, then sfm. A kill lands when the manifest says the
stage is running, checked again while the process group is stopped: never a guess.

Determinism measured on 2 CPU cores (same inputs, two runs): frames and splats write byte-identical
files, and so does usd for the layers whose inputs are unchanged; sfm (pycolmap's threads) and mesh
(floor fit, hole filling) differ slightly, so their figures are compared within tolerances.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from capture_runs import (RUN_TIMEOUT_S, Reference, finish, kill_group, read_manifest, run_capture, start_capture,
                          started_anew)
from twinscan.atomic import is_temporary
from twinscan.layout import LOCK, STAGES as STAGE_ORDER

KILL_AT = 0.2  # a long stage is killed this far into its reference duration, to land mid-work
LONG_STAGE_S = 3.0
TIMING_FIGURES = {"seconds", "fps", "check_seconds"}  # wall-clock figures, never compared
CHECKPOINT = ".splats-checkpoint.pt"
MESH_FACES_REL = 0.15  # how far a resumed run's mesh face counts may differ (see the later-stages test)


# ---- reading the workspace -----------------------------------------------------------------------
def _temporary_names(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                  if is_temporary(p.name))


def _files(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != LOCK)


def _same_bytes(a: Path, b: Path) -> bool:
    if a.is_dir():
        return _files(a) == _files(b) and all(_same_bytes(a / name, b / name) for name in _files(a))
    return a.read_bytes() == b.read_bytes()


def _without_creation_time(usda: Path) -> list[str]:
    """The root layer's text but for the time it was written (its provenance records it)."""
    return [line for line in usda.read_text().splitlines() if "created_utc" not in line]


def _world_from_cam(out: Path) -> dict[str, np.ndarray]:
    """Camera poses by frame, from transforms.json (OpenGL camera axes, as nerfstudio)."""
    frames = json.loads((out / "transforms.json").read_text())["frames"]
    return {frame["file_path"]: np.array(frame["transform_matrix"]) for frame in frames}


def _figures(manifest: dict[str, Any], stage: str) -> dict[str, Any]:
    return {k: v for k, v in manifest["stages"][stage]["figures"].items() if k not in TIMING_FIGURES}


def _close(a: float, b: float, rel: float) -> bool:
    return math.isclose(a, b, rel_tol=rel)


# ---- killing a run inside a stage ----------------------------------------------------------------
@dataclass
class Kill:
    """A run SIGKILLed inside `stage`, and the workspace as it was at that instant."""

    stage: str
    seen: dict[str, Any]  # the manifest at the kill
    leftovers: list[str]  # temporary names in the workspace at the kill
    checkpoint: bool  # whether a splats checkpoint was on disk at the kill


def _kill_inside(video: Path, out: Path, log: Path, stage: str, delay_s: float) -> Kill:
    stale = read_manifest(out)["stages"].get(stage)  # a killed run's record, until this run replaces it
    process = start_capture(video, out, log)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not started_anew(out, stage, stale):
        if process.poll() is not None or time.monotonic() > deadline:
            kill_group(process)
            pytest.fail(f"stage {stage} never started (exit {process.poll()}):\n{log.read_text()[-3000:]}")
        time.sleep(0.005)
    mid_stage = time.monotonic() + delay_s
    while time.monotonic() < mid_stage and started_anew(out, stage, stale):
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGSTOP)  # frozen: what the workspace shows cannot change while read
    seen, leftovers, checkpoint = read_manifest(out), _temporary_names(out), (out / CHECKPOINT).exists()
    os.killpg(process.pid, signal.SIGKILL)
    finish(process, log)
    assert process.returncode == -signal.SIGKILL
    assert seen["stages"][stage]["status"] == "running", f"the kill missed stage {stage}: {seen['stages']}"
    return Kill(stage, seen, leftovers, checkpoint)


def _delay(reference: Reference, stage: str) -> float:
    seconds = reference.manifest["stages"][stage]["seconds"]
    return KILL_AT * seconds if seconds > LONG_STAGE_S else 0.0


# ---- shared runs ---------------------------------------------------------------------------------
@dataclass
class Chain:
    """Runs on one workspace, each killed in the stage after the last one's, then a last run."""

    out: Path
    kills: list[Kill]
    final: dict[str, Any]  # the manifest the last run left
    final_code: int
    final_output: str

    def after(self, kill: Kill) -> dict[str, Any]:
        """The manifest the run after `kill` left (at its own kill, or at the end)."""
        later = self.kills[self.kills.index(kill) + 1:]
        return later[0].seen if later else self.final


@pytest.fixture(scope="module")
def video(smoke_reference: Reference) -> Path:
    return smoke_reference.video


@pytest.fixture(scope="module")
def reference(smoke_reference: Reference) -> Reference:
    """The suite's one uninterrupted smoke run (tests/conftest.py, tests/capture_runs.py)."""
    return smoke_reference


@pytest.fixture(scope="module")
def early_kills(video: Path, reference: Reference, tmp_path_factory: pytest.TempPathFactory) -> Chain:
    """A fresh workspace killed in frames, then in sfm; the third run is stopped once splats starts."""
    root = tmp_path_factory.mktemp("killed_early")
    out = root / "out"
    kills = [_kill_inside(video, out, root / f"{stage}.log", stage, _delay(reference, stage))
             for stage in ("frames", "sfm")]
    last = _kill_inside(video, out, root / "last.log", "splats", delay_s=0.0)  # sfm is done by then
    return Chain(out, kills, last.seen, -signal.SIGKILL, (root / "last.log").read_text())


@pytest.fixture(scope="module")
def late_kills(video: Path, reference: Reference, tmp_path_factory: pytest.TempPathFactory) -> Chain:
    """The reference's workspace as splats started, killed in splats, mesh, usd and check, then finished."""
    root = tmp_path_factory.mktemp("killed_late")
    out = root / "out"
    shutil.copytree(reference.at_splats, out)
    kills = [_kill_inside(video, out, root / f"{stage}.log", stage, _delay(reference, stage))
             for stage in ("splats", "mesh", "usd", "check")]
    code, output = run_capture(video, out, root / "final.log")
    return Chain(out, kills, read_manifest(out), code, output)


# ---- a second run --------------------------------------------------------------------------------
def test_second_run_on_the_same_workspace_is_refused_and_the_first_finishes(reference: Reference) -> None:
    lines = [line for line in (reference.refused.stdout + reference.refused.stderr).splitlines() if line.strip()]
    assert reference.refused.returncode == 2, lines
    assert len(lines) == 1, lines
    assert f"another twinscan run is using {reference.out}" in lines[0] and "wait for it to finish" in lines[0]
    assert reference.running_after_refusal
    assert [record["status"] for record in reference.manifest["stages"].values()] == ["done"] * len(STAGE_ORDER)
    assert list(reference.manifest["stages"]) == list(STAGE_ORDER)
    assert reference.manifest["stages"]["check"]["figures"]["verdict"] is True
    assert _temporary_names(reference.out) == []


# ---- SIGKILL inside each stage -------------------------------------------------------------------
@pytest.mark.parametrize("stage", STAGE_ORDER)
def test_a_run_killed_inside_a_stage_resumes_without_repeating_finished_stages(
        stage: str, request: pytest.FixtureRequest) -> None:
    chain: Chain = request.getfixturevalue("early_kills" if stage in ("frames", "sfm") else "late_kills")
    kill = next(k for k in chain.kills if k.stage == stage)
    finished = [name for name, record in kill.seen["stages"].items() if record["status"] == "done"]
    assert finished == list(STAGE_ORDER[:STAGE_ORDER.index(stage)])
    after = chain.after(kill)
    for name in finished:  # not repeated: the very same record, timestamps and durations included
        assert after["stages"][name] == kill.seen["stages"][name], name
    redone = after["stages"][stage]
    assert redone["status"] == "done" and redone["started"] >= kill.seen["stages"][stage]["started"]
    assert not any(is_temporary(Path(output).name) for output in redone["outputs"])
    assert all((chain.out / output).exists() for output in redone["outputs"])


def test_what_killed_runs_were_writing_is_swept_away(early_kills: Chain, late_kills: Chain) -> None:
    assert any(kill.leftovers for chain in (early_kills, late_kills) for kill in chain.kills), \
        "no kill caught a write in progress"
    for chain in (early_kills, late_kills):
        later = [kill.leftovers for kill in chain.kills[1:]] + [_temporary_names(chain.out)]
        for kill, remaining in zip(chain.kills, later):
            swept = [name for name in kill.leftovers if is_temporary(Path(name).name)]
            assert not set(swept) & set(remaining), (kill.stage, swept, remaining)
    assert _temporary_names(late_kills.out) == []
    assert not (late_kills.out / CHECKPOINT).exists()  # removed once splats finished


def test_runs_killed_in_frames_and_sfm_resume_to_the_reference_frames_and_poses(
        early_kills: Chain, reference: Reference) -> None:
    out, manifest = early_kills.out, early_kills.final
    for name in ("frames", "frames.json"):  # deterministic: byte for byte
        assert _same_bytes(out / name, reference.out / name), name
    assert _figures(manifest, "frames") == _figures(reference.manifest, "frames")
    # SfM from the same frames numbers its images and verifies its pairs the same in every run now
    # (test_sfm: concurrent processes). Before, under load, a resumed run registered 28 of 34 frames
    # where the reference registered 34. Of about 45 runs since, 30 raw-SfM runs side by side under load
    # and most stage runs were bit for bit the same; three stage runs under load came out a little
    # different: 1,427, 1,398 and 1,383 points of 1,431 (3.4 % at most), focal 0.2 % at most, poses
    # 0.024 % of the track and 0.07 degrees apart at most. Cause not found (suspect: CPU SIFT matching's
    # threaded FAISS search; brute force is 12 times slower). The bounds sit above that spread.
    sfm, expected = _figures(manifest, "sfm"), _figures(reference.manifest, "sfm")
    assert (sfm["registered"], sfm["total"], sfm["scale_source"]) == \
        (expected["registered"], expected["total"], expected["scale_source"])
    assert _close(sfm["points3d"], expected["points3d"], 0.06) and _close(sfm["focal_px"], expected["focal_px"], 0.01)
    assert sfm["mean_reprojection_error_px"] < 1.0
    from twinscan.recon.sfm.evaluate import pose_error

    poses, expected_poses = _world_from_cam(out), _world_from_cam(reference.out)
    assert poses.keys() == expected_poses.keys()
    names = sorted(poses)
    error = pose_error(np.stack([poses[n] for n in names]), np.stack([expected_poses[n] for n in names]))
    assert error.relative_rmse < 0.002 and error.rotation_mean_deg < 0.5, error
    model = [name for name in _files(out / "sfm") if not name.startswith("undistorted/images/")]
    assert model == [name for name in _files(reference.out / "sfm") if not name.startswith("undistorted/images/")]


def test_runs_killed_in_every_later_stage_resume_to_the_reference_outputs(
        late_kills: Chain, reference: Reference) -> None:
    import trimesh
    from scipy.spatial import cKDTree

    out, manifest = late_kills.out, late_kills.final
    assert late_kills.final_code == 0, late_kills.final_output
    assert [record["status"] for record in manifest["stages"].values()] == ["done"] * len(STAGE_ORDER)
    assert _files(out) == _files(reference.out)
    for name in ("frames", "frames.json", "sfm", "transforms.json", "splats", "twin_splats.usdc",
                 "twin_cameras.usdc"):  # deterministic from the same inputs: byte for byte
        assert _same_bytes(out / name, reference.out / name), name
    splats, expected = _figures(manifest, "splats"), _figures(reference.manifest, "splats")
    resumed = splats.pop("resumed_from_step")
    expected.pop("resumed_from_step")
    assert splats == expected
    assert (resumed > 0) == next(k for k in late_kills.kills if k.stage == "splats").checkpoint

    mesh, expected = _figures(manifest, "mesh"), _figures(reference.manifest, "mesh")
    assert mesh["views"] == expected["views"] and mesh["voxel_size_m"] == expected["voxel_size_m"]
    # open3d's RANSAC ran threaded, so on this tiny arbitrary-scale capture the floor plane it found
    # varied run to run (tilt 0.10 or 0.54 degrees; heights 7.6 cm apart in one CI run), and with it the
    # faces cut off past the floor's footprint: face counts of two whole runs differed by 6-7 %. The floor
    # now starts level at the busiest height; these bounds were not re-measured since.
    assert _close(mesh["raw_faces"], expected["raw_faces"], 0.05)  # the fusion itself: 0 faces apart there
    for key in ("visual_faces", "collision_faces"):
        assert _close(mesh[key], expected[key], MESH_FACES_REL), key
    assert abs(mesh["floor_height_m"] - expected["floor_height_m"]) < mesh["voxel_size_m"]
    surfaces = []
    for folder in (out, reference.out):
        collision = trimesh.load(folder / "mesh" / "collision.obj", force="mesh", process=False)
        surfaces.append(trimesh.sample.sample_surface(collision, 20_000, seed=0)[0])
    resumed, uninterrupted = surfaces
    chamfer = (cKDTree(uninterrupted).query(resumed)[0].mean() + cKDTree(resumed).query(uninterrupted)[0].mean()) / 2
    assert chamfer < mesh["voxel_size_m"]  # measured 0.022 m between two uninterrupted runs

    usd, expected = _figures(manifest, "usd"), _figures(reference.manifest, "usd")
    for key in ("splats", "sh_degree", "colliders", "textured", "camera_samples", "meters_per_unit", "up_axis",
                "validation_errors", "scale_source"):
        assert usd[key] == expected[key], key
    assert _close(usd["collision_triangles"], expected["collision_triangles"], MESH_FACES_REL)
    check = _figures(manifest, "check")
    assert check["verdict"] is True and check["probes_fell_through"] == 0 and check["validation_errors"] == 0


def test_a_resumed_run_says_which_stages_it_skipped(late_kills: Chain) -> None:
    lines = late_kills.final_output.lower().splitlines()
    for stage in STAGE_ORDER[:-1]:  # the last run only had check left to do
        assert any(stage in line and "skipped" in line for line in lines), stage


# ---- writes that fail ----------------------------------------------------------------------------
def test_failed_writes_exit_with_one_line_and_leave_nothing_trusted(
        video: Path, reference: Reference, tmp_path: Path) -> None:
    """As on a full disk: the usd stage's first layer cannot be written (`ulimit -f`)."""
    out = tmp_path / "out"
    shutil.copytree(reference.out, out)
    (out / "twin.usda").unlink()  # the usd stage has to run again
    limit = (reference.out / "twin_splats.usdc").stat().st_size // 2
    code, output = run_capture(video, out, tmp_path / "limited.log", file_size_limit=limit)
    assert code == 2, output
    errors = [line for line in output.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Traceback" not in output, output
    assert "stage 'usd' failed" in errors[0] and "File too large" in errors[0], errors[0]
    assert "free disk space" in errors[0]
    failed = read_manifest(out)["stages"]["usd"]
    assert failed["status"] == "failed" and "File too large" in failed["error"]
    assert not (out / "twin.usda").exists()
    assert _temporary_names(out) == []

    code, output = run_capture(video, out, tmp_path / "rerun.log")
    assert code == 0, output
    redone = read_manifest(out)["stages"]["usd"]
    assert redone["status"] == "done" and redone["started"] >= failed["started"]
    for name in ("twin_splats.usdc", "twin_collision.usdc", "twin_visual.usdc", "twin_cameras.usdc"):
        assert _same_bytes(out / name, reference.out / name), name
    assert _without_creation_time(out / "twin.usda") == _without_creation_time(reference.out / "twin.usda")


def _with_file_size_limit(limit: int, body: str) -> str:
    """Run `body` in a fresh interpreter under `ulimit -f`; return what it prints."""
    script = (f"import resource, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n{textwrap.dedent(body)}")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_write_truncated_without_an_error_is_refused(tmp_path: Path) -> None:
    """pycolmap's model writer and libpng carry on after a failed write: the file stops at the limit."""
    printed = _with_file_size_limit(4096, f"""
        from twinscan import atomic
        from twinscan.errors import TwinscanError
        try:
            with atomic.atomic_dir({str(tmp_path / "sfm")!r}) as tmp:
                with open(tmp / "images.bin", "wb", buffering=0) as f:
                    for _ in range(10):
                        try:
                            f.write(b"x" * 1000)
                        except OSError:
                            pass  # as a writer that ignores the failure
        except TwinscanError as error:
            print(error.one_line())
    """)
    assert "could not write" in printed and "File too large" in printed and "free disk space" in printed
    assert list(tmp_path.iterdir()) == []


def test_a_library_error_naming_a_full_disk_becomes_one_clear_line(tmp_path: Path) -> None:
    """USD raises its own error type; its message says why."""
    from twinscan import atomic
    from twinscan.errors import TwinscanError

    with pytest.raises(TwinscanError, match="could not write .*twin.usdc: No space left on device") as raised:
        with atomic.atomic_path(tmp_path / "twin.usdc"):
            raise RuntimeError("Error occurred writing file: No space left on device")
    assert "free disk space" in raised.value.fix
    with pytest.raises(RuntimeError, match="unrelated"):
        with atomic.atomic_path(tmp_path / "twin.usdc"):
            raise RuntimeError("unrelated")
    assert list(tmp_path.iterdir()) == []


def test_taking_the_workspace_lock_sweeps_what_killed_writers_left(tmp_path: Path) -> None:
    from twinscan.workspace import Workspace

    for name in (".frames.tmp-0123abcd/000001.jpg", "check/.probes.png.tmp-89abcdef",
                 ".twin_splats.usdc.tmp-01234567.usdc", "frames/000001.jpg", ".splats-checkpoint.pt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    with Workspace(tmp_path).locked():
        assert _temporary_names(tmp_path) == []
    assert _files(tmp_path) == [".splats-checkpoint.pt", "frames/000001.jpg"]


def test_sfm_refuses_to_start_without_the_disk_space_it_needs(tmp_path: Path) -> None:
    """pycolmap aborts the whole process on a full disk, so the stage checks the room first: an SfM
    whose database could not fit (here: a feature budget no disk holds) fails with one line, recorded
    in the manifest, having written nothing."""
    import cv2

    from twinscan.errors import TwinscanError
    from twinscan.recon.sfm import SfmConfig, run_sfm
    from twinscan.recon.sfm.reconstruct import disk_needed
    from twinscan.workspace import Workspace

    (tmp_path / "frames").mkdir()
    records = []
    for i in range(4):
        cv2.imwrite(str(tmp_path / "frames" / f"{i:06d}.jpg"), np.full((32, 32, 3), 128, np.uint8))
        records.append({"file": f"frames/{i:06d}.jpg", "source_index": i})
    (tmp_path / "frames.json").write_text(json.dumps(records))
    free = shutil.disk_usage(tmp_path).free
    greedy = SfmConfig(max_features=free // 4 // 152 + 1)  # four frames' features alone exceed the free space
    assert disk_needed(4, 0, greedy) > free > disk_needed(4, 0, SfmConfig())
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(TwinscanError, match=r"only [\d,]+ MB free .* sfm on 4 frames needs about") as raised:
        run_sfm(Workspace(tmp_path), greedy)
    assert "free disk space" in raised.value.fix
    record = Workspace(tmp_path).stage_record("sfm")
    assert record["status"] == "failed" and "MB free" in record["error"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in ("manifest.json", LOCK)) == before
