"""SfM benchmark: global vs incremental mapping, sequential(+loop keyframes) vs exhaustive matching.

On a synthetic walkthrough (exact ground truth): time, registration, pose error after a similarity
alignment, and -- from the floor marker alone, no ground-truth alignment -- scale, up and floor
errors. Then the same mappers on fountain_p11 against its ground-truth poses, when shared/data has it.

    python benchmarks/bench_sfm.py                         # the issue's size: 300 frames at 960 px
    python benchmarks/bench_sfm.py --frames 60 --width 640  # what fits a 2-core machine

Default picked from this table: incremental mapping with sequential(+loop keyframes) matching, the
fastest combination that met the accuracy bar. Measured on 2 busy CPU cores, 60 frames at 640 px:
incremental/sequential 328 s, 0.013% RMSE, 0.06 deg; incremental/exhaustive 398 s; global/exhaustive
518 s (as accurate); global/sequential 373 s but wrong (10.8% RMSE, 28 deg): GLOMAP needs the dense
view graph of exhaustive matching here, and is not faster on CPU at these sizes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import av
import numpy as np

from twinscan.recon.sfm import SfmConfig, run_sfm
from twinscan.recon.sfm.evaluate import pose_error
from twinscan.recon.sfm.stage import posed_cameras
from twinscan.synth import CaptureConfig, load_ground_truth, make_capture
from twinscan.workspace import Workspace

COMBINATIONS = (("global", "sequential"), ("incremental", "sequential"),
                ("global", "exhaustive"), ("incremental", "exhaustive"))
FOUNTAIN = Path(__file__).resolve().parents[2] / "shared" / "data" / "fountain_p11"


def synthetic_frames(cache: Path, frames: int, width: int, seed: int) -> tuple[Path, object]:
    """A cached 20 s walkthrough with exactly `frames` video frames, all of them in a frames workspace
    (SfM alone is measured here, so frames are not picked by the frames stage)."""
    capture_dir = cache / f"capture_{width}_{frames}_{seed}"
    if not capture_dir.exists():
        make_capture(CaptureConfig(width=width, height=width * 9 // 16 // 2 * 2, fps=frames / 20.0,
                                   duration_s=20.0, seed=seed), capture_dir)
    truth = load_ground_truth(capture_dir)
    frames_ws = cache / f"frames_of_{capture_dir.name}"
    if not frames_ws.exists():
        (frames_ws / "frames").mkdir(parents=True)
        entries = []
        with av.open(str(truth.video_path)) as container:
            for index, frame in enumerate(container.decode(video=0)):
                name = f"{index:06d}.jpg"
                frame.to_image().save(frames_ws / "frames" / name, quality=95)
                entries.append({"file": f"frames/{name}", "source_index": index, "time_s": float(frame.time),
                                "sharpness": None, "motion": None})
        (frames_ws / "frames.json").write_text(json.dumps(entries))
    return frames_ws, truth


def fresh_copy(frames_ws: Path, out: Path) -> Workspace:
    shutil.copytree(frames_ws / "frames", out / "frames")
    shutil.copyfile(frames_ws / "frames.json", out / "frames.json")
    return Workspace(out)


def synthetic_row(ws: Workspace, truth, cfg: SfmConfig) -> dict[str, object]:
    import pycolmap

    started = time.time()
    figures = run_sfm(ws, cfg)
    seconds = time.time() - started
    model = pycolmap.Reconstruction(ws.path("sfm"))
    source_index = {Path(e["file"]).name: e["source_index"] for e in json.loads(ws.path("frames.json").read_text())}
    names = sorted(image.name for image in model.images.values() if image.has_pose)
    estimated = posed_cameras(model)
    true = truth.world_from_cam[[source_index[name] for name in names]]
    aligned = pose_error(estimated, true)
    gt_from_estimated = pycolmap.estimate_sim3d(estimated[:, :3, 3], true[:, :3, 3])
    up = gt_from_estimated.rotation.matrix() @ [0.0, 0.0, 1.0]
    return {"seconds": seconds, "registered": f"{figures['registered']}/{figures['total']}",
            "rmse_pct": 100 * aligned.relative_rmse, "rot_deg": aligned.rotation_mean_deg,
            "scale_err_pct": 100 * (gt_from_estimated.scale - 1),
            "up_err_deg": float(np.degrees(np.arccos(np.clip(up[2], -1, 1)))),
            # cameras' height above the true floor vs above the estimated one (metres)
            "floor_err_m": float(np.mean(estimated[:, 2, 3] - true[:, 2, 3]))}


def fountain_row(out: Path, mapper: str) -> dict[str, object]:
    import pycolmap

    frames = sorted(json.loads((FOUNTAIN / "poses.json").read_text())["frames"], key=lambda f: f["file_path"])
    (out / "frames").mkdir(parents=True)
    entries = []
    for index, frame in enumerate(frames):
        name = Path(frame["file_path"]).name
        shutil.copyfile(FOUNTAIN / frame["file_path"], out / "frames" / name)
        entries.append({"file": f"frames/{name}", "source_index": index, "time_s": index, "sharpness": 1, "motion": 0})
    (out / "frames.json").write_text(json.dumps(entries))
    started = time.time()
    figures = run_sfm(Workspace(out), SfmConfig(max_side=1024, mapper=mapper, overlap=3, loop_keyframes=11))
    seconds = time.time() - started
    model = pycolmap.Reconstruction(out / "sfm")
    by_name = {Path(f["file_path"]).name: np.array(f["camera_to_world"]) for f in frames}
    names = sorted(image.name for image in model.images.values() if image.has_pose)
    error = pose_error(posed_cameras(model), np.array([by_name[name] for name in names]))
    return {"seconds": seconds, "registered": f"{figures['registered']}/{figures['total']}",
            "rmse_pct": 100 * error.relative_rmse, "rmse_m": error.position_rmse, "rot_deg": error.rotation_mean_deg}


def print_table(title: str, rows: list[tuple[str, dict[str, object]]]) -> None:
    columns = list(dict.fromkeys(key for _, row in rows for key in row))
    print(f"\n{title}")
    print("| run | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name, row in rows:
        cells = [f"{row[c]:.3f}" if isinstance(row.get(c), float) else str(row.get(c, "")) for c in columns]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--width", type=int, default=960)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "twinscan-bench-sfm")
    parser.add_argument("--only", nargs="*", help="mapper/matching pairs to run, e.g. incremental/sequential")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    frames_ws, truth = synthetic_frames(args.cache, args.frames, args.width, args.seed)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.cache) as scratch:
        for mapper, matching in COMBINATIONS:
            if args.only and f"{mapper}/{matching}" not in args.only:
                continue
            ws = fresh_copy(frames_ws, Path(scratch) / f"{mapper}_{matching}")
            cfg = SfmConfig(max_side=args.width, mapper=mapper, matching=matching, marker_size=truth.marker.size_m,
                            marker_dict=truth.marker.dict_name)
            try:
                rows.append((f"{mapper}/{matching}", synthetic_row(ws, truth, cfg)))
            except Exception as error:  # a failed combination is a result too
                rows.append((f"{mapper}/{matching}", {"error": str(error)[:80]}))
            print_table("partial", rows[-1:])
        print_table(f"synthetic cell, {args.width} px, {len(json.loads((frames_ws / 'frames.json').read_text()))} frames"
                    " (errors from the marker alone, except rmse/rot: after a similarity to ground truth)", rows)
        if FOUNTAIN.exists():
            fountain = [(mapper, fountain_row(Path(scratch) / f"fountain_{mapper}", mapper))
                        for mapper in ("global", "incremental")]
            print_table("fountain_p11, 11 images at 1024 px (similarity-aligned to Strecha ground truth)", fountain)


if __name__ == "__main__":
    main()
