"""SfM on the real captures in shared/data: registration, reprojection error, time, pose error.

- fountain_p11: 11 photos with Strecha's ground-truth poses (metres).
- fox: 50 phone-video frames; its transforms.json poses came from COLMAP (not ground truth), so
  the pose error is agreement with another COLMAP run, after a similarity alignment. The same
  transforms.json is also imported (`--from-transforms`), which triangulates points with its poses.
- apple_video: a real handheld video (no poses): the frames stage picks frames, then SfM.

Each run is a child process with a time limit; a capture that is absent is skipped.

    python benchmarks/bench_sfm_real.py                 # preview preset (640 px), all captures
    python benchmarks/bench_sfm_real.py --preset standard --only fox
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from twinscan.presets import get_preset
from twinscan.recon.sfm import SfmConfig, import_transforms, run_sfm
from twinscan.recon.sfm.evaluate import pose_error
from twinscan.recon.sfm.nerfstudio import read_transforms
from twinscan.recon.sfm.stage import posed_cameras
from twinscan.workspace import Workspace

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
RUNS = ("fountain_p11", "fox", "fox --from-transforms", "apple_video")
NEEDS = {"fountain_p11": "fountain_p11/poses.json", "fox": "fox/transforms.json",
         "fox --from-transforms": "fox/transforms.json", "apple_video": "apple_video/apple.mp4"}


def adopt_images(out: Path, images: list[Path]) -> Workspace:
    """A workspace as the frames stage leaves it (OUT/frames/ + frames.json), keeping the file names."""
    (out / "frames").mkdir(parents=True)
    entries = []
    for index, image in enumerate(images):
        shutil.copyfile(image, out / "frames" / image.name)
        entries.append({"file": f"frames/{image.name}", "source_index": index, "time_s": float(index),
                        "sharpness": None, "motion": None})
    (out / "frames.json").write_text(json.dumps(entries))
    return Workspace(out)


def reference_poses(run: str) -> tuple[dict[str, np.ndarray], str] | None:
    """({image name: world_from_cam}, what they are) for the captures that come with poses."""
    if run == "fountain_p11":
        frames = json.loads((DATA / NEEDS[run]).read_text())["frames"]
        return ({Path(f["file_path"]).name: np.array(f["camera_to_world"]) for f in frames},
                "Strecha ground truth (m)")
    if run == "fox":
        _, frames = read_transforms(DATA / NEEDS[run])
        return {Path(file_path).name: world_from_cam for file_path, world_from_cam in frames}, "instant-ngp COLMAP poses"
    return None


def measure(run: str, out: Path, preset: str) -> dict[str, object]:
    """One capture through the stage (or the importer), with its figures and pose error."""
    import pycolmap

    cfg = SfmConfig.from_preset(get_preset(preset))
    started, cpu_started = time.time(), time.process_time()
    if run == "fountain_p11":
        ws = adopt_images(out, sorted((DATA / "fountain_p11" / "images").glob("*.jpg")))
        figures = run_sfm(ws, SfmConfig.from_preset(get_preset(preset), overlap=3, loop_keyframes=11))
    elif run == "fox":
        ws = adopt_images(out, sorted((DATA / "fox" / "images").glob("*.jpg")))
        figures = run_sfm(ws, cfg)
    elif run == "fox --from-transforms":
        ws = Workspace(out)
        figures = import_transforms(ws, DATA / NEEDS[run], cfg)
    else:
        from twinscan.frames import FramesConfig, run_frames

        ws = Workspace(out)
        kept = run_frames(ws, DATA / NEEDS[run], FramesConfig.from_preset(get_preset(preset)))["kept"]
        figures = run_sfm(ws, cfg) | {"frames_kept": kept}
    row: dict[str, object] = {
        "s": time.time() - started, "cpu_s": time.process_time() - cpu_started, "registered": f"{figures['registered']}/{figures['total']}",
        "points": figures["points3d"], "reproj_px": figures["mean_reprojection_error_px"],
        "track_len": figures["mean_track_length"], "focal_px": figures["focal_px"]}
    reference = reference_poses(run)
    if reference is not None:
        poses, _ = reference
        model = pycolmap.Reconstruction(ws.path("sfm"))
        names = sorted(image.name for image in model.images.values() if image.has_pose)
        error = pose_error(posed_cameras(model), np.array([poses[name] for name in names]))
        row.update(rmse_pct_extent=100 * error.relative_rmse, rmse=error.position_rmse,
                   rot_mean_deg=error.rotation_mean_deg, rot_max_deg=error.rotation_max_deg)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="preview", help="quality preset whose SfM settings are used")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per capture")
    parser.add_argument("--only", nargs="*", choices=RUNS)
    parser.add_argument("--one", choices=RUNS, help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.out, args.preset)))
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_sfm import print_table

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = []
    with tempfile.TemporaryDirectory(prefix="twinscan-bench-sfm-real-") as scratch:
        for run in args.only or RUNS:
            if not (DATA / NEEDS[run]).exists():
                rows.append((run, {"skipped": f"{DATA / NEEDS[run]} is absent"}))
                continue
            out = Path(scratch) / run.replace(" ", "_")
            try:
                child = subprocess.run([sys.executable, __file__, "--one", run, "--out", str(out),
                                        "--preset", args.preset], capture_output=True, text=True,
                                       timeout=args.timeout)
            except subprocess.TimeoutExpired:
                rows.append((run, {"s": f"timeout > {args.timeout:.0f}"}))
            else:
                if child.returncode == 0:
                    rows.append((run, json.loads(child.stdout.strip().splitlines()[-1])))
                else:
                    rows.append((run, {"error": (child.stderr.strip().splitlines() or [f"exit code {child.returncode}"])[-1][:120]}))
            print_table("partial", rows[-1:])
    references = "; ".join(f"{run}: {reference_poses(run)[1]}" for run in ("fountain_p11", "fox")
                           if (DATA / NEEDS[run]).exists())
    print_table(f"real captures, {args.preset} preset, started {started}, {os.cpu_count()} CPUs, load average at "
                f"the end {os.getloadavg()[0]:.1f} (pose error after a similarity alignment to {references})", rows)


if __name__ == "__main__":
    main()
