"""SfM benchmark: global vs incremental mapping, sequential(+loop keyframes) vs exhaustive matching.

On a synthetic walkthrough with exact ground truth: time of each step, registration, pose error
after a similarity alignment, and -- from the floor marker alone, no ground-truth alignment --
scale, up and floor errors. Features are extracted once and each matching is run once; both mappers
then start from a copy of the same matched database, so a combination's time is
extract + match + map. Every step runs in a child process with a time limit.

    python benchmarks/bench_sfm.py                                  # the issue's size: the bundled
                                                                    # sample, every 2nd frame (300 at 960 px)
    python benchmarks/bench_sfm.py --generate --frames 60 --width 640   # a generated walkthrough
    python benchmarks/bench_sfm.py --capture CAPTURE --every 2 --width 320 --only incremental/sequential \
        --min-pose-inliers 30 20                                    # COLMAP's minimum against twinscan's

Exhaustive matching is first timed on a random subset of its pairs; when that extrapolates past the
time limit, the full run is skipped and the extrapolated matching time is reported instead.

Default (SfmConfig): incremental mapping with sequential(+loop keyframes) matching. On 300 frames at
960 px (the issue's size) both mappers met the accuracy bar after sequential matching (incremental
0.008 %, global 0.006 % RMSE), incremental was faster (1709 s vs 1980 s in all), and exhaustive
matching extrapolated to 13,094 s against 666 s for sequential; at 60 frames, 640 px, global mapping
failed after sequential matching (10.8 % RMSE) and needed exhaustive.

Real captures (fox, fountain_p11, apple video) are in benchmarks/bench_sfm_real.py.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import av
import numpy as np

from twinscan.recon.sfm import SfmConfig
from twinscan.recon.sfm.config import features_for_side
from twinscan.recon.sfm.evaluate import pose_error
from twinscan.recon.sfm.reconstruct import extract_features, map_features, match_features, model_figures
from twinscan.recon.sfm.stage import align_to_world, posed_cameras
from twinscan.synth import CaptureConfig, load_ground_truth, make_capture

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "factory_cell"
MAPPERS = ("global", "incremental")
MATCHINGS = ("sequential", "exhaustive")
SUBSET_PAIRS = 300  # random pairs timed before a full exhaustive matching


# ---- inputs ------------------------------------------------------------------------------------
def generated_capture(cache: Path, frames: int, width: int, seed: int) -> Path:
    """A cached 20 s generated walkthrough with exactly `frames` video frames."""
    capture_dir = cache / f"capture_{width}_{frames}_{seed}"
    if not capture_dir.exists():
        make_capture(CaptureConfig(width=width, height=width * 9 // 16 // 2 * 2, fps=frames / 20.0,
                                   duration_s=20.0, seed=seed), capture_dir)
    return capture_dir


def frames_folder(cache: Path, capture_dir: Path, every: int) -> tuple[Path, list[str], list[int]]:
    """Every `every`-th video frame as JPEG (cached); (folder, names in time order, source indices).
    SfM alone is measured here, so frames are not picked by the frames stage."""
    folder = cache / f"frames_{capture_dir.name}_every{every}"
    if not folder.exists():
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with av.open(str(capture_dir / "video.mp4")) as container:
            for index, frame in enumerate(container.decode(video=0)):
                if index % every == 0:
                    frame.to_image().save(tmp / f"{index:06d}.jpg", quality=95)
        tmp.rename(folder)
    names = sorted(path.name for path in folder.glob("*.jpg"))
    return folder, names, [int(Path(name).stem) for name in names]


# ---- steps, each in a child process with a time limit --------------------------------------------
def _step(result_file: str, step: str, args: tuple) -> None:
    import pycolmap

    pycolmap.logging.minloglevel = pycolmap.logging.ERROR
    wall, cpu = time.time(), time.process_time()
    {"extract": extract_features, "match": match_features, "map": _map_and_save, "pairs": _match_pairs}[step](*args)
    Path(result_file).write_text(json.dumps({"wall_s": time.time() - wall, "cpu_s": time.process_time() - cpu}))


def _map_and_save(database: Path, image_dir: Path, work: Path, cfg: SfmConfig) -> None:
    models = map_features(database, image_dir, work, cfg)
    if models:
        best = max(models.values(), key=lambda model: model.num_reg_images())
        (work / "best").mkdir()
        best.write(work / "best")


def _match_pairs(database: Path, pairs_file: Path) -> None:
    import pycolmap

    imported = pycolmap.ImportedPairingOptions()
    imported.match_list_path = str(pairs_file)
    pycolmap.match_image_pairs(database, pairing_options=imported)


def timed(step: str, args: tuple, timeout_s: float, scratch: Path) -> dict[str, float] | None:
    """{wall_s, cpu_s} of one step, or None when it ran past timeout_s (the child is killed)."""
    result_file = scratch / f"result_{step}_{time.time_ns()}.json"
    child = multiprocessing.get_context("spawn").Process(target=_step, args=(str(result_file), step, args))
    child.start()
    child.join(timeout_s)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    if child.exitcode != 0 or not result_file.exists():
        raise RuntimeError(f"{step} failed (exit code {child.exitcode})")
    return json.loads(result_file.read_text())


def extracted_features(database: Path, image_dir: Path, names: list[str], cfg: SfmConfig, timeout_s: float,
                       scratch: Path) -> dict[str, float] | None:
    """{wall_s, cpu_s} of extracting the features into `database`; kept in the cache with its timing,
    since every combination starts from the same features."""
    timing = database.with_suffix(".json")
    if database.exists() and timing.exists():
        return json.loads(timing.read_text())
    partial = scratch / "extracting.db"
    seconds = timed("extract", (partial, image_dir, names, cfg), timeout_s, scratch)
    if seconds is not None:
        shutil.copyfile(partial, database)
        timing.write_text(json.dumps(seconds))
    return seconds


def exhaustive_estimate(database: Path, names: list[str], scratch: Path, timeout_s: float, seed: int) -> float:
    """Seconds (wall) that exhaustive matching of all pairs would take, from SUBSET_PAIRS random pairs."""
    rng = np.random.default_rng(seed)
    all_pairs = [(a, b) for a in range(len(names)) for b in range(a + 1, len(names))]
    subset = [all_pairs[i] for i in rng.choice(len(all_pairs), min(SUBSET_PAIRS, len(all_pairs)), replace=False)]
    pairs_file = scratch / "subset_pairs.txt"
    pairs_file.write_text("".join(f"{names[a]} {names[b]}\n" for a, b in subset))
    copy = scratch / "subset.db"
    shutil.copyfile(database, copy)
    seconds = timed("pairs", (copy, pairs_file), timeout_s, scratch)
    copy.unlink()
    return float("inf") if seconds is None else seconds["wall_s"] * len(all_pairs) / len(subset)


# ---- evaluation ----------------------------------------------------------------------------------
def evaluate(model, truth, source_index: dict[str, int], image_dir: Path, cfg: SfmConfig, total: int) -> dict:
    """Registration, pose error after a similarity to ground truth, and the world frame from the
    marker alone (scale, up, floor), as the stage would align it."""
    import pycolmap

    figures = model_figures(model, total)
    align_to_world(model, image_dir, cfg)
    names = sorted(image.name for image in model.images.values() if image.has_pose)
    estimated = posed_cameras(model)
    true = truth.world_from_cam[[source_index[name] for name in names]]
    aligned = pose_error(estimated, true)
    gt_from_estimated = pycolmap.estimate_sim3d(estimated[:, :3, 3], true[:, :3, 3])
    up = gt_from_estimated.rotation.matrix() @ [0.0, 0.0, 1.0]
    return {"registered": f"{figures['registered']}/{total}", "reproj_px": figures["mean_reprojection_error_px"],
            "rmse_pct": 100 * aligned.relative_rmse, "rot_deg": aligned.rotation_mean_deg,
            "rot_max_deg": aligned.rotation_max_deg, "scale_err_pct": 100 * (gt_from_estimated.scale - 1),
            "up_err_deg": float(np.degrees(np.arccos(np.clip(up[2], -1, 1)))),
            # cameras' height above the estimated floor minus above the true one (metres)
            "floor_err_m": float(np.mean(estimated[:, 2, 3] - true[:, 2, 3]))}


def print_table(title: str, rows: list[tuple[str, dict[str, object]]]) -> None:
    columns = list(dict.fromkeys(key for _, row in rows for key in row))
    print(f"\n{title}")
    print("| run | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name, row in rows:
        cells = [f"{row[c]:.3f}" if isinstance(row.get(c), float) else str(row.get(c, "")) for c in columns]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def run_all(capture_dir: Path, every: int, cfg: SfmConfig, timeout_s: float, extract_timeout_s: float,
            cache: Path, only: list[str] | None, pose_inliers: list[int]) -> list[tuple[str, dict[str, object]]]:
    """Every mapper/matching pair; incremental mapping once per minimum of pose inliers in `pose_inliers`."""
    import pycolmap

    truth = load_ground_truth(capture_dir)
    image_dir, names, indices = frames_folder(cache, capture_dir, every)
    source_index = dict(zip(names, indices))
    rows: list[tuple[str, dict[str, object]]] = []
    with tempfile.TemporaryDirectory(dir=cache) as scratch_name:
        scratch = Path(scratch_name)
        extracted = cache / f"{image_dir.name}_{cfg.max_side}px_{cfg.max_features}.db"
        extract = extracted_features(extracted, image_dir, names, cfg, extract_timeout_s, scratch)
        if extract is None:
            return [("all", {"error": f"feature extraction ran past {extract_timeout_s:.0f} s"})]
        print(f"extraction: {extract['wall_s']:.0f} s wall, {extract['cpu_s']:.0f} s CPU", flush=True)
        for matching in MATCHINGS:
            wanted = [m for m in MAPPERS if not only or f"{m}/{matching}" in only]
            if not wanted:
                continue
            matched = scratch / f"{matching}.db"
            shutil.copyfile(extracted, matched)
            match_cfg = replace(cfg, matching=matching)
            if matching == "exhaustive":
                estimate = exhaustive_estimate(matched, names, scratch, timeout_s, cfg.seed)
                print(f"exhaustive matching, extrapolated from {SUBSET_PAIRS} random pairs: {estimate:.0f} s",
                      flush=True)
                if estimate > 0.9 * timeout_s:
                    for mapper in wanted:
                        rows.append((f"{mapper}/{matching}", {
                            "extract_s": extract["wall_s"],
                            "match_s": f"not run: {estimate:.0f} (extrapolated from {SUBSET_PAIRS} pairs)"}))
                    continue
            match = timed("match", (matched, names, match_cfg, scratch), timeout_s, scratch)
            if match is None:
                for mapper in wanted:
                    rows.append((f"{mapper}/{matching}", {"extract_s": extract["wall_s"],
                                                          "match_s": f"timeout > {timeout_s:.0f}"}))
                continue
            print(f"{matching} matching: {match['wall_s']:.0f} s wall, {match['cpu_s']:.0f} s CPU", flush=True)
            variants = [(mapper, inliers) for mapper in wanted
                        for inliers in (pose_inliers if mapper == "incremental" else [cfg.min_pose_inliers])]
            for mapper, inliers in variants:
                name = f"{mapper}/{matching}" + (f" >={inliers} inliers" if mapper == "incremental" else "")
                work = scratch / f"{mapper}_{matching}_{inliers}"
                work.mkdir()
                database = work / "database.db"
                shutil.copyfile(matched, database)
                map_cfg = replace(match_cfg, mapper=mapper, min_pose_inliers=inliers)
                mapped = timed("map", (database, image_dir, work, map_cfg), timeout_s, scratch)
                row: dict[str, object] = {"extract_s": extract["wall_s"], "match_s": match["wall_s"]}
                if mapped is None:
                    row["map_s"] = f"timeout > {timeout_s:.0f}"
                else:
                    row.update(map_s=mapped["wall_s"],
                               total_s=extract["wall_s"] + match["wall_s"] + mapped["wall_s"],
                               cpu_s=extract["cpu_s"] + match["cpu_s"] + mapped["cpu_s"])
                    model = pycolmap.Reconstruction(work / "best") if (work / "best").exists() else None
                    if model is None or model.num_reg_images() < 3:
                        row["registered"] = f"{model.num_reg_images() if model else 0}/{len(names)}"
                    else:
                        row.update(evaluate(model, truth, source_index, image_dir, map_cfg, len(names)))
                rows.append((name, row))
                print_table("partial", rows[-1:])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capture", type=Path, default=SAMPLE, help="a synthetic capture folder (ground_truth.json)")
    parser.add_argument("--every", type=int, default=2, help="use every n-th video frame")
    parser.add_argument("--generate", action="store_true", help="generate a walkthrough instead (--frames, --width)")
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--width", type=int, default=960, help="longest image side for SfM, pixels")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per matching or mapping")
    parser.add_argument("--extract-timeout", type=float, default=3600, help="seconds for the shared extraction")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "twinscan-bench-sfm")
    parser.add_argument("--only", nargs="*", help="mapper/matching pairs to run, e.g. incremental/sequential")
    parser.add_argument("--min-pose-inliers", nargs="+", type=int, default=[SfmConfig.min_pose_inliers],
                        help="incremental mapping's minimum 2D-3D inliers to register a frame; several: one run each")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    capture_dir = generated_capture(args.cache, args.frames, args.width, args.seed) if args.generate else args.capture
    every = 1 if args.generate else args.every
    truth = load_ground_truth(capture_dir)
    cfg = SfmConfig(max_side=args.width, max_features=features_for_side(args.width), seed=args.seed,
                    marker_size=truth.marker.size_m, marker_dict=truth.marker.dict_name)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = run_all(capture_dir, every, cfg, args.timeout, args.extract_timeout, args.cache, args.only,
                   args.min_pose_inliers)
    frames = len(range(0, truth.frame_count, every))
    print_table(f"{capture_dir.name}: {frames} frames at {args.width} px, started {started}, "
                f"{os.cpu_count()} CPUs, load average at the end {os.getloadavg()[0]:.1f} "
                "(rmse/rot after a similarity to ground truth; scale, up, floor from the marker alone)", rows)


if __name__ == "__main__":
    main()
