"""Frames stage vs the common baseline: ffmpeg writes every frame to disk, then keep every Nth.

Generates a 1080p30 and a 4K30 handheld-like clip (a pan across a detailed texture with bursts of
motion blur, as shaky hands give; in a temporary folder, or kept in --clips to save the two minutes
of encoding next time), runs the stage and the baseline alternately on the same clip, and prints
throughput, the speed ratio (median over --repeats pairs: robust to a machine shared with other
work), and the mean sharpness of each selection (variance of the Laplacian on the same small grey
image, for the same number of frames).

    python benchmarks/bench_frames.py [--seconds-1080 8] [--seconds-4k 4] [--quality standard]
                                      [--repeats 3] [--clips DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import av
import cv2
import imageio_ffmpeg
import numpy as np

from twinscan.frames import FramesConfig, run_frames
from twinscan.frames.record import read_frames
from twinscan.frames.scoring import sharpness
from twinscan.frames.source import open_source
from twinscan.presets import get_preset
from twinscan.workspace import Workspace

FPS = 30
CORES = 2  # the target machine: a 2-core laptop or CI runner


def detailed_texture(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Smooth colour noise with sharp-edged rectangles and text: detail at every scale."""
    base = cv2.resize(rng.integers(0, 256, (height // 32, width // 32, 3), np.uint8), (width, height),
                      interpolation=cv2.INTER_CUBIC)
    scale = height / 1080
    for _ in range(int(width * height / 4000 / scale ** 2 * scale)):
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        w, h = (rng.integers(8, 120, 2) * scale).astype(int)
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        cv2.rectangle(base, (x, y), (x + w, y + h), colour, -1 if rng.random() < 0.5 else max(1, int(2 * scale)))
    for _ in range(int(400 * width / 3840)):
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        cv2.putText(base, "CELL-%03d" % rng.integers(1000), (x, y), cv2.FONT_HERSHEY_SIMPLEX, scale,
                    (0, 0, 0), max(1, int(2 * scale)), cv2.LINE_AA)
    return base


def make_clip(path: Path, width: int, height: int, seconds: float, seed: int = 0) -> None:
    """Pan at a quarter of the frame width per second, speeding up and slowing down; every second a
    0.3 s burst of horizontal motion blur."""
    rng = np.random.default_rng(seed)
    pan_px = [int(width * 0.25 * t * (1 + 0.5 * np.sin(2 * np.pi * t / 3))) for t in np.arange(seconds * FPS) / FPS]
    texture = detailed_texture(rng, width + max(pan_px) + 2, height)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=FPS, options={"preset": "veryfast", "crf": "20"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i, x in enumerate(pan_px):
            image = texture[:, x: x + width]
            if (i / FPS) % 1.0 > 0.7:
                image = cv2.blur(image, (int(rng.integers(9, 31) * width / 1920), 1))
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def score_sharpness(video: Path, score_side: int) -> np.ndarray:
    """Sharpness of every frame, measured as the stage measures it (not timed)."""
    _, frames = open_source(video, score_side)
    return np.array([sharpness(frame.grey) for frame in frames])


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def decode_only_cpu_s(video: Path) -> float:
    """The floor for any method that decodes every frame: threaded decoding and nothing else."""
    started = time.process_time()
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for _ in container.decode(stream):
            pass
    return time.process_time() - started


def ffmpeg_every_nth(video: Path, folder: Path, count: int) -> tuple[float, float, np.ndarray]:
    """The baseline: every frame to disk as JPEG (nerfstudio's quality settings), then keep `count`
    evenly spaced ones. Returns wall seconds, CPU seconds and the kept frame indices."""
    every, kept = folder / "every", folder / "kept"
    every.mkdir(parents=True)
    kept.mkdir()
    wall, cpu, own_cpu = time.perf_counter(), children_cpu_s(), time.process_time()
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(video), "-qscale:v", "1", "-qmin", "1",
                    "-start_number", "0", str(every / "%06d.jpg")], check=True)
    files = sorted(every.iterdir())
    chosen = np.round(np.linspace(0, len(files) - 1, count)).astype(int)
    for i in chosen:
        shutil.move(files[i], kept / files[i].name)
    cpu_s = children_cpu_s() - cpu + time.process_time() - own_cpu
    return time.perf_counter() - wall, cpu_s, chosen


def measure(label: str, video: Path, config: FramesConfig, tmp: Path, repeats: int) -> dict[str, float]:
    """Stage and baseline alternately, `repeats` times each; medians of the times and of the per-pair ratios."""
    pairs = []
    for repeat in range(repeats):
        out = tmp / f"stage_{label}"
        wall, cpu = time.perf_counter(), time.process_time()
        figures = run_frames(Workspace(out), video, config, force=True)
        stage_wall, stage_cpu = time.perf_counter() - wall, time.process_time() - cpu
        ours = [entry.source_index for entry in read_frames(Workspace(out))]
        shutil.rmtree(out)
        base_wall, base_cpu, baseline = ffmpeg_every_nth(video, tmp / f"ffmpeg_{label}", figures["kept"])
        shutil.rmtree(tmp / f"ffmpeg_{label}")
        pairs.append({"stage_wall": stage_wall, "stage_cpu": stage_cpu, "ffmpeg_wall": base_wall,
                      "ffmpeg_cpu": base_cpu, "speedup": base_wall / stage_wall, "cpu_speedup": base_cpu / stage_cpu})
    scores = score_sharpness(video, config.score_side)
    row = {key: float(np.median([pair[key] for pair in pairs])) for key in pairs[0]}
    frames = figures["decoded"]
    return {**row, "frames": frames, "kept": figures["kept"], "not_decoded": figures.get("not_decoded", 0),
            "decode_cpu": decode_only_cpu_s(video), "stage_fps_2cores": frames / (row["stage_cpu"] / CORES),
            "sharp_stage": float(scores[ours].mean()), "sharp_every_nth": float(scores[baseline].mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds-1080", type=float, default=8.0)
    parser.add_argument("--seconds-4k", type=float, default=4.0)
    parser.add_argument("--quality", default="standard")
    parser.add_argument("--repeats", type=int, default=3, help="stage/baseline pairs per clip")
    parser.add_argument("--clips", type=Path, help="keep the generated clips here and reuse them")
    args = parser.parse_args()
    config = FramesConfig.from_preset(get_preset(args.quality))
    rows = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench_frames_") as tmp:
        clips = args.clips or Path(tmp)
        clips.mkdir(parents=True, exist_ok=True)
        for label, (width, height), seconds in (("1080p30", (1920, 1080), args.seconds_1080),
                                                ("4K30", (3840, 2160), args.seconds_4k)):
            video = clips / f"{label}_{seconds:g}s.mp4"
            if not video.exists():
                make_clip(video, width, height, seconds)
            rows[label] = measure(label, video, config, Path(tmp), args.repeats)
    print(f"quality preset {args.quality!r}; CPU seconds include decoder threads (robust to a busy machine);")
    print(f"fps on {CORES} cores = frames / (CPU s / {CORES}); the ffmpeg baseline keeps as many frames as the stage;")
    print(f"medians of {args.repeats} alternating stage/baseline pairs; load average (1 min) "
          f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    header = ["clip", "frames", "kept", "not decoded", "stage s", "ffmpeg s", "speedup", "stage CPU s", "ffmpeg CPU s",
              "CPU speedup", "decode-all CPU s", f"stage fps ({CORES} cores)", "x realtime", "sharpness stage",
              "sharpness every-Nth"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for label, r in rows.items():
        print(" | ".join([label, str(r["frames"]), str(r["kept"]), str(r["not_decoded"]), f"{r['stage_wall']:.2f}",
                          f"{r['ffmpeg_wall']:.2f}", f"{r['speedup']:.2f}x", f"{r['stage_cpu']:.2f}",
                          f"{r['ffmpeg_cpu']:.2f}", f"{r['cpu_speedup']:.2f}x", f"{r['decode_cpu']:.2f}",
                          f"{r['stage_fps_2cores']:.0f}", f"{r['stage_fps_2cores'] / FPS:.1f}x",
                          f"{r['sharp_stage']:.0f}", f"{r['sharp_every_nth']:.0f}"]))


if __name__ == "__main__":
    main()
