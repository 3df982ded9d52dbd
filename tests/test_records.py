"""The stages' typed records (twinscan/records.py): what later stages, the report, the viewer and `twinscan
render` read of an earlier stage. Each round-trips, matches the files it sits beside, is what its readers
follow (not the manifest), and an older workspace without it gets one line saying how to make it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from twinscan.errors import TwinscanError
from twinscan.frames.record import FrameEntry, read_frames, write_frames
from twinscan.gaussians import read_ply
from twinscan.layout import (BACKGROUND_PLY, FRAMES_JSON, HELDOUT_DIR, MESH_SUMMARY, SFM_RECORD, SPLATS_PLY,
                             SPLATS_RECORD, TWIN)
from twinscan.meshing.record import FloorRecord, MeshRecord, read_mesh_record
from twinscan.recon.sfm.record import ScaleSource, SfmRecord, WorldFrame, read_sfm_record
from twinscan.recon.splats.record import SplatsRecord, read_splats_record
from twinscan.workspace import Workspace


def _copy(smoke_capture: Path, destination: Path) -> Workspace:
    shutil.copytree(smoke_capture, destination, ignore=shutil.ignore_patterns(".twinscan.lock"))
    return Workspace(destination)


def test_records_round_trip_through_json() -> None:
    world = WorldFrame(ScaleSource.MARKER, metric=True, origin="marker 3", marker_id=3, marker_size_m=0.3,
                       marker_dict="4x4_50", marker_centre_z_m=0.001, floor_found=True,
                       world_from_colmap={"scale": 2.0, "rotation": np.eye(3).tolist(), "translation": [0, 0, 1]})
    records = [SfmRecord(world, registered=40, total=42, mean_reprojection_error_px=0.61),
               SplatsRecord(8, ("000000.jpg", "000008.jpg"), splats=1200, background_splats=0),
               MeshRecord(("collision.obj", "mesh.json"), FloorRecord(0.01, 0.4, ((-1.0, -2.0), (3.0, 4.0)), 18.5),
                          {"collision_faces": 900}, ("a warning",)),
               MeshRecord(("collision.obj",), None, {}, ())]
    for record in records:
        assert type(record).from_json(json.loads(json.dumps(record.to_json()))) == record


def test_frames_json_is_read_as_typed_entries(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    entries = [FrameEntry("frames/000003.jpg", 3, 0.1, 120.5, 0.0), FrameEntry("frames/000009.jpg", 9, None, None, None)]
    write_frames(ws, entries)
    assert read_frames(ws) == entries and [entry.name for entry in entries] == ["000003.jpg", "000009.jpg"]
    ws.path(FRAMES_JSON).write_text(json.dumps([{"file": "frames/000003.jpg", "time_s": 0.1}]))  # an older layout
    with pytest.raises(TwinscanError) as older:
        read_frames(ws)
    assert "cannot be read" in older.value.what and f"twinscan frames VIDEO -o {ws.root} --force" in older.value.fix


def test_the_records_describe_the_files_beside_them(smoke_capture: Path) -> None:
    ws = Workspace(smoke_capture)
    splats = read_splats_record(ws)
    assert sorted(f"{Path(name).stem}.png" for name in splats.heldout_views) == sorted(
        p.name for p in ws.path(HELDOUT_DIR).glob("*.png"))
    assert splats.heldout_every == ws.stage_record("splats")["params"]["heldout_every"]
    assert splats.splats == read_ply(ws.path(SPLATS_PLY)).count
    assert splats.background_splats == (read_ply(ws.path(BACKGROUND_PLY)).count
                                        if ws.path(BACKGROUND_PLY).is_file() else 0)
    mesh = read_mesh_record(ws)
    assert mesh.floor is not None and mesh.floor.area_m2 > 0  # the tiny capture has a floor
    assert all(ws.path(f"{MESH_SUMMARY.rsplit('/', 1)[0]}/{name}").exists() for name in mesh.files)
    world = read_sfm_record(ws).world  # the capture ran with --marker-size 0.3
    assert (world.marker_id, world.marker_size_m, world.marker_dict) == (0, 0.3, "4x4_50")


def test_readers_follow_the_records_not_the_manifest(smoke_capture: Path, tmp_path: Path) -> None:
    """Render's held-out frames, the twin's floor area and the viewer's marker come from the records: edited
    there (and only there), each reader follows. One that read the manifest by key would not."""
    from twinscan.render.twin import load_render_twin
    from twinscan.usd_export.stage import workspace_content
    from twinscan.view.twin import load_twin

    ws = _copy(smoke_capture, tmp_path / "edited")
    splats = read_splats_record(ws)
    names = load_render_twin(ws.root).capture.names
    chosen = (names[1], names[-1])  # not every 8th frame
    ws.path(SPLATS_RECORD).write_text(json.dumps(SplatsRecord(3, chosen, splats.splats, 0).to_json()))
    heldout = load_render_twin(ws.root).capture.heldout
    assert [name for name, held in zip(names, heldout) if held] == list(chosen)

    mesh = read_mesh_record(ws)
    bounds = ((-0.25, -0.5), (0.75, 1.5))
    edited = MeshRecord(mesh.files, FloorRecord(0.0, 0.0, bounds, 2.0), mesh.figures, mesh.warnings)
    ws.path(MESH_SUMMARY).write_text(json.dumps(edited.to_json()))
    floor = workspace_content(ws).floor
    assert (floor.xy_min, floor.xy_max) == bounds

    sfm = read_sfm_record(ws)
    world = sfm.world.__class__(**(vars(sfm.world) | {"marker_size_m": 0.5, "marker_centre_z_m": 0.02}))
    ws.path(SFM_RECORD).write_text(json.dumps(SfmRecord(world, sfm.registered, sfm.total,
                                                        sfm.mean_reprojection_error_px).to_json()))
    marker = load_twin(ws.root).marker
    assert marker is not None and (marker.size_m, marker.centre_z_m) == (0.5, 0.02)


@pytest.mark.parametrize("record, stage", [(SPLATS_RECORD, "splats"), (MESH_SUMMARY, "mesh"), (SFM_RECORD, "sfm")])
def test_an_older_workspace_without_a_record_gets_one_line_with_the_hint(smoke_capture: Path, tmp_path: Path,
                                                                         record: str, stage: str) -> None:
    """Missing (a workspace from before the record), or from an older twinscan (a field it lacks): the
    reader says which file and which command makes it; nothing is guessed."""
    from typer.testing import CliRunner

    from twinscan.cli.app import app

    readers = {"splats": read_splats_record, "mesh": read_mesh_record, "sfm": read_sfm_record}
    ws = _copy(smoke_capture, tmp_path / "older")
    content = json.loads(ws.path(record).read_text())
    ws.path(record).write_text(json.dumps({key: value for key, value in content.items()
                                           if key not in ("heldout_views", "floor", "world")}))
    with pytest.raises(TwinscanError) as older:
        readers[stage](ws)
    assert "cannot be read" in older.value.what and f"twinscan {stage} {ws.root} --force" in older.value.fix
    ws.path(record).unlink()
    with pytest.raises(TwinscanError) as missing:
        readers[stage](ws)
    assert missing.value.what == f"{ws.path(record)} is missing" and f"twinscan {stage}" in missing.value.fix
    if stage == "splats":  # `twinscan render` on it: one line, exit 2, before anything is written
        result = CliRunner().invoke(app, ["render", str(ws.root), "-o", str(tmp_path / "dataset")])
        assert result.exit_code == 2 and "splats.json is missing" in result.output
        assert len(result.output.strip().splitlines()) == 1
        assert not (tmp_path / "dataset").exists()
    if stage == "mesh":  # the usd stage needs the floor from it
        from twinscan.usd_export.stage import workspace_content

        with pytest.raises(TwinscanError, match="mesh.json is missing"):
            workspace_content(ws)
    assert ws.path(TWIN).is_file()
