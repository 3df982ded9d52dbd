"""Quality presets: the only knob a technician turns. Each stage derives its config from one."""

from __future__ import annotations

from dataclasses import dataclass

from twinscan.errors import TwinscanError

AUTO = "auto"  # --quality auto: standard on a usable CUDA GPU, preview on the CPU


@dataclass(frozen=True)
class Preset:
    name: str
    max_frames: int  # frame budget kept from the video
    max_side: int  # longest image side, pixels, for training and the mesh stage's renders
    # longest side of the kept frames, pixels: SfM finds its features there, and training downscales them to
    # max_side. A default capture of the generator (960 x 540 video, 180 frames) registered at 640 px came out
    # 0.34 % small with 1.3 cm of bend left after the best similarity (camera centres 2.3 cm RMSE), which put
    # a wall 4.9 m out 2.4 cm in front of itself; the same frames at 960 px: 0.015 %, 0.34 cm (0.49 cm RMSE),
    # for 563 s of SfM instead of 227 s (docs/benchmarks.md, session 39). Not every walk gains: another came
    # out 0.24 % large with 1.2 cm of bend at 960 px (0.38 % small at 640 px; session 40)
    frame_max_side: int
    splat_steps: int  # 3DGS optimisation steps
    max_gaussians: int  # cap on the splat count (MCMC budget)
    mesh_faces: int  # collision mesh face budget
    mesh_resolution: int  # TSDF voxels along the captured region's longest side
    texture_size: int  # visual mesh texture atlas side, pixels
    # frames: most motion steps between kept frames where the view turns to plainer surfaces. A smoke
    # capture's 320 px frames hold fewer features, and 2 steps split its SfM model (10/29 registered in a
    # loaded run); at 1.5 it registers 35/35. The sample at preview keeps 2: 1.5 joined its laps every time
    # but cost 0.5 cm of collision p95 (docs/benchmarks.md).
    max_gap_steps: float = 2.0
    # frames: a kept frame every this much camera motion (fraction of the image diagonal; FramesConfig). A walk
    # that does not fill max_frames keeps twice the views 0.07 kept: on four hard cells (one inward loop in
    # 30 s: 50 -> 86-92 frames) the structure's completeness @5 cm went 72-82 -> 75-89 %, with the panels'
    # colour edges (meshing/panels.py) F@5 0.79-0.89 -> 0.81-0.91 (docs/benchmarks.md, session 22). A longer
    # walk is thinned evenly to max_frames either way. Smoke keeps 0.07: it proves a run works, in least time.
    motion_step: float = 0.035


PRESETS: dict[str, Preset] = {
    # a minute on a CPU for a tiny capture: proves a capture (or a batch, or a node) works end to end
    "smoke": Preset("smoke", max_frames=40, max_side=320, frame_max_side=320, splat_steps=300, max_gaussians=20_000,
                    mesh_faces=5_000, mesh_resolution=128, texture_size=512, max_gap_steps=1.5, motion_step=0.07),
    # minutes on a laptop: the sample (180 frames) took 9.5 min on 2 cores with SfM at 640 px, 7.5 of them splats
    # (3000 steps); SfM at 960 px takes 2.5 times as long (a generated capture of its size: 227 -> 563 s)
    "preview": Preset("preview", max_frames=180, max_side=640, frame_max_side=960, splat_steps=3000,
                      max_gaussians=100_000, mesh_faces=20_000, mesh_resolution=384, texture_size=1024),
    # A GPU node (one H100/H200-class GPU), sized for a 2-minute 1080p walkthrough to a twin in about 10 minutes
    # (issue 20's goal; not yet measured: docs/benchmarks.md, "GPU node"):
    # - max_frames 300: 2.5 frames a second of a 2-minute walk; GPU SIFT makes frames cheap for extraction
    #   and matching, and what grows with them is incremental mapping (CPU bundle adjustment) and the mesh
    #   stage's per-view renders, so 1.7x the sample's 180 and not more.
    # - max_side 1280: 1080p frames at 1280x720 (0.9 MP) for SIFT and training; the per-step cost of gsplat
    #   grows with the pixels, and 720p is where 3DGS captures are usually trained.
    # - splat_steps 15_000: half of 3DGS's 30k schedule, what the 10-minute goal leaves room for (its paper's
    #   7k-step models trail its 30k ones by 1.6 dB on Mip-NeRF 360; 15k sits between).
    # - max_gaussians 1_000_000: the MCMC budget; about 1 GB of parameters, gradients and Adam state (59
    #   floats each, 4 times), well inside any 24 GB GPU (bench_gpu_memory.py prints the peak).
    "standard": Preset("standard", max_frames=300, max_side=1280, frame_max_side=1280, splat_steps=15_000,
                       max_gaussians=1_000_000, mesh_faces=50_000, mesh_resolution=512, texture_size=2048),
    # The best a GPU node gives, for a 5-minute walkthrough:
    # - max_frames 600: 2 frames a second of 5 minutes (SfM's sequential matching is linear in frames).
    # - max_side 1920: 1080p at full size (2.1 MP, 2.3x standard's pixels a step).
    # - splat_steps 30_000: 3DGS's full schedule.
    # - max_gaussians 3_000_000: 3x standard's budget for 2.3x the pixels and a larger walk; peak GPU memory
    #   is estimated by benchmarks/bench_gpu_memory.py from a measured smaller run.
    "high": Preset("high", max_frames=600, max_side=1920, frame_max_side=1920, splat_steps=30_000,
                   max_gaussians=3_000_000, mesh_faces=200_000, mesh_resolution=768, texture_size=4096),
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise TwinscanError(
            f"unknown quality preset '{name}'", f"use one of: {AUTO}, {', '.join(PRESETS)}"
        ) from None


@dataclass(frozen=True)
class PresetChoice:
    """The preset a run uses and why (recorded in the workspace's manifest)."""

    name: str
    reason: str


def choose_preset(requested: str, device: str, gpu_usable: bool) -> PresetChoice:
    """`--quality` as given, or for `auto`: `standard` where the splats will train on a usable CUDA GPU
    (not with `--device cpu`), else `preview`, which a CPU finishes in minutes."""
    if requested != AUTO:
        return PresetChoice(get_preset(requested).name, f"--quality {requested}")
    if device == "cpu":
        return PresetChoice("preview", "--quality auto with --device cpu")
    if gpu_usable:
        return PresetChoice("standard", "--quality auto: a usable CUDA GPU (gsplat's kernels load)")
    return PresetChoice("preview", "--quality auto: no usable CUDA GPU, so the CPU preset")


def preset_choice(quality: str, device: str) -> PresetChoice:
    """`choose_preset` on this machine: a usable GPU (gsplat's kernels load) is looked for only for
    `--quality auto`, and not with `--device cpu`."""
    gpu_usable = False
    if quality == AUTO and device != "cpu":
        from twinscan.gaussians.raster import cuda_available

        gpu_usable = cuda_available()
    return choose_preset(quality, device, gpu_usable)


def resolve_preset(quality: str, device: str) -> Preset:
    """The preset a stage builds its config from (`preset_choice`'s)."""
    return get_preset(preset_choice(quality, device).name)
