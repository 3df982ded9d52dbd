"""The frames stage on synthetic captures with ground truth: what it keeps, what it skips, how it fails."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from twinscan.errors import TwinscanError
from twinscan.frames import FramesConfig, run_frames
from twinscan.frames.prefetch import prefetched
from twinscan.frames.selection import KeyframeSelector
from twinscan.frames.source import SourceFrame
from twinscan.frames.source import _score_image as score_image
from twinscan.frames.source import open_source
from twinscan.presets import get_preset
from twinscan.synth import CaptureConfig, GroundTruth, make_capture
from twinscan.workspace import Workspace

BLUR_S = (2.0, 3.0)
STILL_S = (4.5, 6.0)
STILL_RAMP_S = 0.4  # twinscan.synth.trajectory's speed ramp
CAPTURE = CaptureConfig(width=320, height=180, fps=10.0, duration_s=8.0, seed=3, blur_stretch_s=BLUR_S,
                        still_stretch_s=STILL_S)
CONFIG = FramesConfig(max_frames=100, max_side=320)


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> GroundTruth:
    return make_capture(CAPTURE, tmp_path_factory.mktemp("capture") / "cell")


@pytest.fixture(scope="module")
def kept(capture: GroundTruth, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, list[dict]]:
    out = tmp_path_factory.mktemp("frames")
    figures = run_frames(Workspace(out), capture.video_path, CONFIG)
    return out, figures, json.loads((out / "frames.json").read_text())


def decoded_frames(video: Path) -> list[np.ndarray]:
    """Every frame as stored (RGB), no rotation applied."""
    with av.open(str(video)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def encode(frames: list[np.ndarray], path: Path, codec: str = "libx264", fps: int = 10, pix_fmt: str = "yuv420p",
           pts_ms: list[int] | None = None, options: dict[str, str] | None = None) -> Path:
    """Write RGB frames as a video; `pts_ms` gives each frame's own time (variable frame rate)."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps, options=options or {})
        stream.height, stream.width = frames[0].shape[:2]
        stream.pix_fmt = pix_fmt
        if pts_ms is not None:
            stream.codec_context.time_base = Fraction(1, 1000)
        for i, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            if pts_ms is not None:
                frame.pts, frame.time_base = pts_ms[i], Fraction(1, 1000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def remux(video: Path, path: Path, rotation_ccw: int = 0, faststart: bool = False) -> Path:
    """Copy the packets untouched into a new mp4, with a display rotation and/or the index first."""
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(video)) as source, av.open(str(path), "w", options=options) as out:
        stream = out.add_stream_from_template(source.streams.video[0])
        if rotation_ccw:
            stream.set_display_rotation(rotation_ccw)
        for packet in source.demux(source.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)
    return path


def frames_in(records: list[dict], stretch: tuple[float, float]) -> list[dict]:
    return [r for r in records if stretch[0] <= r["time_s"] <= stretch[1]]


def assert_no_finished_stage(out: Path) -> None:
    assert not (out / "frames").exists() and not (out / "frames.json").exists()
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]
    assert Workspace(out).stage_record("frames")["status"] == "failed"


# ---- selection -----------------------------------------------------------------------------------
def test_records_match_files_and_figures(kept: tuple[Path, dict, list[dict]], capture: GroundTruth) -> None:
    out, figures, records = kept
    assert sorted(p.name for p in (out / "frames").iterdir()) == sorted(Path(r["file"]).name for r in records)
    indices = [r["source_index"] for r in records]
    assert indices == sorted(set(indices))
    for record in records:
        assert record["time_s"] == pytest.approx(capture.times_s[record["source_index"]], abs=1e-3)
        assert cv2.imread(str(out / record["file"])).shape == (180, 320, 3)
    assert figures["kept"] == len(records) and figures["decoded"] == capture.frame_count
    assert figures["mean_sharpness"] == pytest.approx(np.mean([r["sharpness"] for r in records]), rel=1e-3)
    record = Workspace(out).stage_record("frames")
    assert record["status"] == "done" and record["figures"] == figures


def test_blurred_stretch_is_skipped(kept: tuple[Path, dict, list[dict]], capture: GroundTruth) -> None:
    _, figures, records = kept
    blurred = capture.motion_blur_px > 8  # ground truth: image motion during the exposure
    assert blurred.sum() >= 5 and figures["blurred"] >= blurred.sum() - 2
    assert not [r for r in records if blurred[r["source_index"]]]
    assert frames_in(records, (BLUR_S[1] + 0.15, BLUR_S[1] + 1.5)), "the walk after the blur is covered again"


def test_still_stretch_gives_at_most_two_frames_and_motion_gives_many(kept: tuple[Path, dict, list[dict]]) -> None:
    _, _, records = kept
    # the synth eases in and out of standing still over 0.4 s inside the stretch; frames kept on those
    # ramps are kept for real motion, so the count covers the span where the camera stands
    standing = (STILL_S[0] + STILL_RAMP_S, STILL_S[1] - STILL_RAMP_S)
    assert len(frames_in(records, standing)) <= 2
    moving = frames_in(records, (0.0, BLUR_S[0])) + frames_in(records, (STILL_S[1] + 0.2, CAPTURE.duration_s))
    assert len(moving) >= 6
    assert all(0.0 < r["motion"] <= 1.0 for r in records[1:])


def test_selected_frames_are_sharper_than_uniform_sampling(kept: tuple[Path, dict, list[dict]],
                                                           capture: GroundTruth) -> None:
    _, _, records = kept
    selected = [r["source_index"] for r in records]
    uniform = np.round(np.linspace(0, capture.frame_count - 1, len(selected))).astype(int)
    assert capture.motion_blur_px[selected].mean() < 0.6 * capture.motion_blur_px[uniform].mean()


def test_budget_thins_evenly_and_keeps_files_in_step(capture: GroundTruth, tmp_path: Path) -> None:
    figures = run_frames(Workspace(tmp_path), capture.video_path, FramesConfig(max_frames=5, max_side=160))
    records = json.loads((tmp_path / "frames.json").read_text())
    assert figures["kept"] == len(records) == 5
    assert sorted(p.name for p in (tmp_path / "frames").iterdir()) == [Path(r["file"]).name for r in records]
    assert max(cv2.imread(str(tmp_path / records[0]["file"])).shape) == 160
    assert records[-1]["time_s"] - records[0]["time_s"] > 0.6 * CAPTURE.duration_s


def test_finished_stage_is_skipped_and_force_redoes_it(capture: GroundTruth, tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    config = FramesConfig.from_preset(get_preset("preview"), max_frames=20)
    assert config.max_side == get_preset("preview").frame_max_side
    run_frames(ws, capture.video_path, config)
    started = ws.stage_record("frames")["started"]
    (tmp_path / "frames" / "marker.txt").write_text("untouched")
    run_frames(ws, capture.video_path, config)
    assert (tmp_path / "frames" / "marker.txt").exists() and ws.stage_record("frames")["started"] == started
    run_frames(ws, capture.video_path, config, force=True)
    assert not (tmp_path / "frames" / "marker.txt").exists()


# ---- inputs: rotation, codecs, frame rate, image folders ------------------------------------------
@pytest.fixture(scope="module")
def upright(capture: GroundTruth) -> list[np.ndarray]:
    return decoded_frames(capture.video_path)


def assert_upright(out: Path, upright: list[np.ndarray], min_psnr: float = 28.0) -> None:
    for record in json.loads((out / "frames.json").read_text()):
        written = cv2.imread(str(out / record["file"]))
        expected = cv2.cvtColor(upright[record["source_index"]], cv2.COLOR_RGB2BGR)
        assert written.shape == expected.shape
        assert cv2.PSNR(written, expected) > min_psnr


def test_portrait_phone_video_comes_out_upright(capture: GroundTruth, upright: list[np.ndarray],
                                                tmp_path: Path) -> None:
    rotated = make_capture(dataclasses.replace(CAPTURE, rotation_deg=90), tmp_path / "portrait")
    assert decoded_frames(rotated.video_path)[0].shape == (320, 180, 3)  # stored sideways
    figures = run_frames(Workspace(tmp_path / "out"), rotated.video_path, CONFIG)
    assert figures["rotation_deg"] % 360 == 270  # the display matrix turns it clockwise
    assert_upright(tmp_path / "out", upright)


@pytest.mark.parametrize("rotation_ccw", [90, 180])  # -90, as phones write, is the synth capture above
def test_display_rotation_is_applied(capture: GroundTruth, upright: list[np.ndarray], tmp_path: Path,
                                     rotation_ccw: int) -> None:
    """The stored pixels are the upright ones turned back, so the output must match the upright video."""
    coded = [np.rot90(rgb, -rotation_ccw // 90) for rgb in upright]
    video = encode(coded, tmp_path / "coded.mp4", options={"crf": "14"})
    remux(video, tmp_path / "rotated.mp4", rotation_ccw=rotation_ccw)
    run_frames(Workspace(tmp_path / "out"), tmp_path / "rotated.mp4", CONFIG)
    assert_upright(tmp_path / "out", upright)


@pytest.mark.parametrize("pix_fmt", ["yuv420p", "yuv420p10le"])  # 10-bit: HDR phone video
def test_hevc_video(upright: list[np.ndarray], capture: GroundTruth, tmp_path: Path, pix_fmt: str) -> None:
    if "libx265" not in av.codecs_available:
        pytest.skip("this PyAV build cannot encode HEVC (libx265)")
    video = encode(upright, tmp_path / "hevc.mp4", codec="libx265", pix_fmt=pix_fmt,
                   options={"crf": "18", "x265-params": "log-level=error"})
    with av.open(str(video)) as container:
        assert container.streams.video[0].codec_context.name == "hevc"
        assert container.streams.video[0].codec_context.pix_fmt == pix_fmt
    figures = run_frames(Workspace(tmp_path / "out"), video, CONFIG)
    records = json.loads((tmp_path / "out" / "frames.json").read_text())
    assert figures["decoded"] == capture.frame_count and figures["kept"] >= 6
    assert not any(capture.motion_blur_px[r["source_index"]] > 8 for r in records)
    assert_upright(tmp_path / "out", upright)


@pytest.fixture(scope="module")
def variable_rate(upright: list[np.ndarray], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """The capture re-encoded with irregular gaps between frames; returns the video and each frame's time."""
    gaps_ms = np.random.default_rng(0).choice([33, 50, 100, 180], size=len(upright))
    pts_ms = np.concatenate([[0], np.cumsum(gaps_ms[:-1])]).tolist()
    return encode(upright, tmp_path_factory.mktemp("vfr") / "vfr.mp4", pts_ms=pts_ms), np.array(pts_ms) / 1000


def test_variable_frame_rate_times_come_from_timestamps(variable_rate: tuple[Path, np.ndarray],
                                                        tmp_path: Path) -> None:
    video, times_s = variable_rate
    run_frames(Workspace(tmp_path / "out"), video, CONFIG)
    for record in json.loads((tmp_path / "out" / "frames.json").read_text()):
        assert record["time_s"] == pytest.approx(times_s[record["source_index"]], abs=1e-3)


def test_decoding_in_a_thread_keeps_order_and_the_kept_set(capture: GroundTruth, tmp_path: Path) -> None:
    """The decoder runs ahead in its own thread; frames still come in order, each the same picture as
    a plain single-threaded decode, and two runs keep exactly the same frames."""
    report, frames = open_source(capture.video_path, CONFIG.score_side)
    threaded = list(frames)
    assert [frame.index for frame in threaded] == list(range(capture.frame_count)) == list(range(report.frames))
    with av.open(str(capture.video_path)) as container:
        for frame, plain in zip(threaded, container.decode(video=0), strict=True):
            assert np.array_equal(frame.grey, score_image(plain, CONFIG.score_side))
    runs = []
    for attempt in range(2):
        run_frames(Workspace(tmp_path / str(attempt)), capture.video_path, CONFIG)
        runs.append(json.loads((tmp_path / str(attempt) / "frames.json").read_text()))
    assert runs[0] == runs[1] and len(runs[0]) >= 6


def test_prefetch_raises_where_the_producer_failed_and_stops_when_closed() -> None:
    closed = threading.Event()

    def items(fail_at: int | None):
        try:
            for i in range(1000):
                if i == fail_at:
                    raise ValueError("damaged")
                yield i
        finally:
            closed.set()

    got = []
    with pytest.raises(ValueError, match="damaged"):
        for item in prefetched(items(fail_at=7), depth=3):
            got.append(item)
    assert got == list(range(7)) and closed.is_set()
    closed.clear()
    early = prefetched(items(fail_at=None), depth=3)
    assert [next(early) for _ in range(5)] == list(range(5))
    early.close()  # the consumer stops: the producer is joined and its source closed
    assert closed.is_set() and not any(t.name == "twinscan-prefetch" for t in threading.enumerate())


def test_folder_of_images(upright: list[np.ndarray], tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for i, rgb in enumerate(upright):
        cv2.imwrite(str(folder / f"IMG_{i:04d}.png"), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    (folder / "notes.txt").write_text("not an image")
    figures = run_frames(Workspace(tmp_path / "out"), folder, CONFIG)
    records = json.loads((tmp_path / "out" / "frames.json").read_text())
    assert figures["decoded"] == len(upright) and figures["kept"] >= 6
    assert all(r["time_s"] is None for r in records)
    assert_upright(tmp_path / "out", upright, min_psnr=35.0)


# ---- bad input -----------------------------------------------------------------------------------
def test_truncated_video_keeps_what_decodes_and_says_so(capture: GroundTruth, tmp_path: Path) -> None:
    whole = remux(capture.video_path, tmp_path / "whole.mp4", faststart=True).read_bytes()
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(whole[: len(whole) * 7 // 10])
    figures = run_frames(Workspace(tmp_path / "out"), truncated, CONFIG)
    assert 0.4 * capture.frame_count < figures["decoded"] < capture.frame_count
    warnings = Workspace(tmp_path / "out").stage_record("frames")["warnings"]
    assert any("truncated" in w for w in warnings)


def test_truncated_video_without_index_fails_cleanly(capture: GroundTruth, tmp_path: Path) -> None:
    data = capture.video_path.read_bytes()  # index (moov) at the end, as most phones write it
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(TwinscanError) as error:
        run_frames(Workspace(tmp_path / "out"), truncated, CONFIG)
    assert "corrupt or truncated" in error.value.one_line()
    assert_no_finished_stage(tmp_path / "out")


def _fails(video: Path, out: Path, match: str) -> None:
    with pytest.raises(TwinscanError, match=match) as error:
        run_frames(Workspace(out), video, CONFIG)
    assert "\n" not in error.value.one_line() and error.value.fix
    assert_no_finished_stage(out)


def test_not_a_video(tmp_path: Path) -> None:
    (tmp_path / "walkthrough.mp4").write_text("these are my notes, not a video")
    _fails(tmp_path / "walkthrough.mp4", tmp_path / "out", "cannot be read as a video")


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(TwinscanError, match="does not exist"):
        run_frames(Workspace(tmp_path / "out"), tmp_path / "nowhere.mp4", CONFIG)
    assert not (tmp_path / "out" / "frames").exists()


@pytest.mark.parametrize(("damage", "match"), [
    (lambda frames: frames[:6], "too short"),
    (lambda frames: [rgb // 12 for rgb in frames], "too dark or too bright"),
    (lambda frames: [cv2.GaussianBlur(rgb, (0, 0), 6) for rgb in frames], "blurred"),
    (lambda frames: [frames[0]] * len(frames), "usable frames"),  # the camera never moves
])
def test_unusable_video_fails_with_the_reason(upright: list[np.ndarray], tmp_path: Path,
                                              damage: Callable[[list[np.ndarray]], list[np.ndarray]],
                                              match: str) -> None:
    video = encode(damage(upright), tmp_path / "bad.mp4")
    _fails(video, tmp_path / "out", match)


def test_budget_below_what_a_reconstruction_needs_is_refused() -> None:
    with pytest.raises(TwinscanError, match="--max-frames 2 is too few"):
        FramesConfig.from_preset(get_preset("preview"), max_frames=2)


def pan_with_contrast(contrast_at: Callable[[int], float], frames: int = 150) -> tuple[list[int], KeyframeSelector]:
    """Kept frame indices of a 3 px/frame pan at 30 fps across noise whose contrast follows `contrast_at`."""
    rng = np.random.default_rng(0)
    noise = cv2.GaussianBlur(rng.standard_normal((180, 1200)).astype(np.float32), (0, 0), 1.0)
    texture = 50 * noise / noise.std()
    selector = KeyframeSelector(FramesConfig(), 30.0)
    kept = []
    for i in range(frames):
        grey = np.clip(128 + contrast_at(i) * texture[:, 3 * i: 3 * i + 320], 0, 255).astype(np.uint8)
        kept += [candidate.frame.index for candidate in selector.push(SourceFrame(i, i / 30, grey, lambda side: grey))]
    kept += [candidate.frame.index for candidate in selector.finish()]
    return kept, selector


def gaps_in_steps(kept: list[int]) -> np.ndarray:
    return np.diff(kept) * 3 / np.hypot(320, 180) / FramesConfig().motion_step


def test_turning_to_plainer_surfaces_leaves_no_gap_in_coverage() -> None:
    """Panning on while the view turns, within a second, from detailed things to a plainer floor (contrast
    falling by 45 %, sharpness to 30 %) looks like blur against recent frames. The views must still
    overlap: no more than `max_gap_steps` motion steps between kept frames, and the frames kept on that
    account are counted. (Without the rule: 3.5 steps.)"""
    kept, selector = pan_with_contrast(lambda i: np.interp(i, [40, 70], [1.0, 0.55]))
    assert selector.counts.blurred > 0 and selector.counts.kept_for_coverage > 0
    assert gaps_in_steps(kept).max() <= FramesConfig().max_gap_steps + 0.2, gaps_in_steps(kept).round(2)


def test_sharpness_rising_for_long_does_not_hold_a_window_open() -> None:
    """A window stays open while each frame is sharper than the last, but only up to `max_gap_steps`
    (at 3 fps a run of ever sharper frames once held one open across 60 degrees of a loop)."""
    kept, _ = pan_with_contrast(lambda i: 0.3 + 0.7 * i / 150)
    assert gaps_in_steps(kept).max() <= FramesConfig().max_gap_steps + 0.2, gaps_in_steps(kept).round(2)
