"""`twinscan`: one command from a walkthrough video to a simulation-ready OpenUSD twin."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from twinscan import __version__
from twinscan.cli.batch import batch as batch_command
from twinscan.cli.errors import user_errors
from twinscan.cli.options import (Convex, Device, DeviceChoice, DynamicFriction, Force, Half, Mapper, MapperChoice,
                                  MarkerDict, MarkerSize, MaxFrames, OutDir, Quality, QualityChoice, Restitution, Scale,
                                  StaticFriction, Usdz, VideoArg, Workdir)
from twinscan.cli.report import report as report_command
from twinscan.cli.summary import print_capture_summary, print_usd_summary, print_workspace_info
from twinscan.errors import TwinscanError
from twinscan.layout import TWIN
from twinscan.pipeline import CaptureOptions, import_sfm_stage, run_capture, run_stage
from twinscan.progress import console, say
from twinscan.runtime import init_runtime
from twinscan.workspace import Workspace

app = typer.Typer(
    name="twinscan",
    help="Turn a phone walkthrough video of a robot workcell into a simulation-ready OpenUSD digital twin.\n\n"
         "Example: twinscan capture walkthrough.mp4 -o cell_twin",
    no_args_is_help=True,
    rich_markup_mode=None,  # help text is shown as written: `twinscan[physics]` is not rich markup
    context_settings={"help_option_names": ["-h", "--help"]},
)



def _version(value: bool) -> None:
    if value:
        console.print(f"twinscan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                 help="Print the version and exit.")] = False) -> None:
    """Turn a phone walkthrough video of a robot workcell into a simulation-ready OpenUSD digital twin."""


@app.command()
@user_errors
def capture(video: VideoArg, out: OutDir, quality: Quality = QualityChoice.auto, device: Device = DeviceChoice.auto,
            force: Force = False, max_frames: MaxFrames = None, mapper: Mapper = MapperChoice.incremental,
            marker_size: MarkerSize = None, marker_dict: MarkerDict = "4x4_50", scale: Scale = None,
            convex: Convex = False, usdz: Usdz = False, half: Half = False, static_friction: StaticFriction = 0.6,
            dynamic_friction: DynamicFriction = 0.5, restitution: Restitution = 0.1) -> None:
    """Run every stage: video -> frames -> camera poses -> ... -> twin.

    Re-running resumes: finished stages are skipped.

    Example: twinscan capture walkthrough.mp4 -o cell_twin --marker-size 0.30
    """
    options = CaptureOptions(quality=quality.value, device=device.value, force=force, max_frames=max_frames,
                             mapper=mapper.value, marker_size=marker_size, marker_dict=marker_dict, scale=scale,
                             convex=convex, usdz=usdz, half=half, static_friction=static_friction,
                             dynamic_friction=dynamic_friction, restitution=restitution)
    timings: dict[str, float] = {}

    def on_stage(name: str, _figures: dict, seconds: float, skipped: bool) -> None:
        timings[name] = seconds
        if skipped:
            say(f"{name}: skipped (finished before with the same inputs; --force redoes it)")

    run_capture(video, out, options, on_stage=on_stage)
    print_capture_summary(Workspace(out), timings)


@app.command()
@user_errors
def frames(video: VideoArg, out: OutDir, quality: Quality = QualityChoice.auto, max_frames: MaxFrames = None,
           force: Force = False) -> None:
    """Pick sharp, well-spaced frames from the video into OUT/frames/.

    Example: twinscan frames walkthrough.mp4 -o cell_twin --max-frames 120
    """
    options = CaptureOptions(quality=quality.value, max_frames=max_frames, force=force)
    run_stage("frames", Workspace(out), options, video)
    print_workspace_info(Workspace(out), only="frames")


@app.command()
@user_errors
def sfm(workdir: Workdir, quality: Quality = QualityChoice.auto, device: Device = DeviceChoice.auto,
        mapper: Mapper = MapperChoice.incremental,
        marker_size: MarkerSize = None, marker_dict: MarkerDict = "4x4_50", scale: Scale = None,
        force: Force = False,
        from_colmap: Annotated[Optional[Path], typer.Option(
            help="Adopt an existing COLMAP model folder instead of reconstructing.")] = None,
        from_transforms: Annotated[Optional[Path], typer.Option(
            help="Adopt poses from a nerfstudio/Polycam/Record3D transforms.json instead of reconstructing.")] = None,
        ) -> None:
    """Find camera poses and sparse points (COLMAP), in metres with Z up and the floor at z = 0.

    Example: twinscan sfm cell_twin --marker-size 0.30 --marker-dict 4x4_50
             twinscan sfm cell_twin --from-colmap colmap/sparse/0
    """
    options = CaptureOptions(quality=quality.value, device=device.value, mapper=mapper.value, marker_size=marker_size,
                             marker_dict=marker_dict, scale=scale, force=force)
    if from_colmap is not None or from_transforms is not None:
        import_sfm_stage(Workspace(workdir), options, from_colmap, from_transforms)
    else:
        run_stage("sfm", Workspace(workdir), options)
    print_workspace_info(Workspace(workdir), only="sfm")


@app.command()
@user_errors
def splats(workdir: Workdir, quality: Quality = QualityChoice.auto, device: Device = DeviceChoice.auto,
           force: Force = False) -> None:
    """Train 3D Gaussian Splats on the posed frames (gsplat on CUDA, twinscan's rasterizer on CPU).

    Every 8th frame is held out and scored (PSNR, SSIM). Interrupted training resumes from its checkpoint.

    Example: twinscan splats cell_twin --quality standard --device cuda
    """
    run_stage("splats", Workspace(workdir), CaptureOptions(quality=quality.value, device=device.value, force=force))
    print_workspace_info(Workspace(workdir), only="splats")


@app.command()
@user_errors
def mesh(workdir: Workdir, quality: Quality = QualityChoice.auto, convex: Convex = False,
         force: Force = False) -> None:
    """Extract the collision mesh (with a z = 0 floor) and the textured visual mesh from the splats.

    Example: twinscan mesh cell_twin --convex
    """
    run_stage("mesh", Workspace(workdir), CaptureOptions(quality=quality.value, convex=convex, force=force))
    print_workspace_info(Workspace(workdir), only="mesh")


@app.command()
@user_errors
def usd(workdir: Workdir,
        from_ply: Annotated[Optional[Path], typer.Option(
            help="Package a 3DGS .ply trained elsewhere (gsplat, nerfstudio, 3DGRUT) instead of OUT's splats.")] = None,
        mesh: Annotated[Optional[Path], typer.Option(
            help="With --from-ply: a collision mesh (OBJ/PLY/STL/GLB) in the same frame as the splats.")] = None,
        usdz: Usdz = False, half: Half = False, force: Force = False, static_friction: StaticFriction = 0.6,
        dynamic_friction: DynamicFriction = 0.5, restitution: Restitution = 0.1) -> None:
    """Write the OpenUSD twin OUT/twin.usda: splats, colliders, visual mesh, cameras (Z up, metres).

    Example: twinscan usd cell_twin --usdz
             twinscan usd cell_twin --from-ply point_cloud.ply --mesh collision.obj
    """
    from twinscan.usd_export import ExportOptions
    from twinscan.usd_export.content import PhysicsMaterial
    from twinscan.usd_export.from_ply import package_from_ply_workspace

    if from_ply is None:
        if mesh is not None:
            raise TwinscanError("--mesh only goes with --from-ply", "drop --mesh, or add --from-ply FILE.ply")
        run_stage("usd", Workspace(workdir), CaptureOptions(usdz=usdz, half=half, force=force,
                                                         static_friction=static_friction,
                                                         dynamic_friction=dynamic_friction,
                                                         restitution=restitution))  # validates
        written = workdir / TWIN
    else:
        written, warnings = package_from_ply_workspace(  # validates; records OUT's usd stage for `info`
            workdir, from_ply, mesh, options=ExportOptions(half_precision=half, usdz=usdz),
            physics_material=PhysicsMaterial(static_friction, dynamic_friction, restitution))
        for line in warnings:
            say(("warning", "yellow"), f" {line}")
    print_usd_summary(written)


@app.command()
@user_errors
def check(twin: Annotated[Path, typer.Argument(help="The twin's root layer, e.g. OUT/twin.usda, or the capture's OUT folder.")],
          physics: Annotated[bool, typer.Option(help="Drop probe boxes in NVIDIA Newton (needs twinscan[physics]).")] = True,
          plot: Annotated[Optional[Path], typer.Option(help="Write a top-down PNG of the probes at rest.")] = None,
          ) -> None:
    """Validate a twin (USD errors, units, colliders) and drop boxes on it in a physics engine.

    Exits non-zero when the stage has errors or a box falls through or hovers.

    Example: twinscan check cell_twin/twin.usda --plot probes.png      twinscan check cell_twin
    """
    from twinscan.check import CheckConfig, check_twin, plot_probes

    if twin.is_dir():  # the folder `twinscan capture -o` wrote: its root layer
        twin = twin / TWIN
    report = check_twin(twin, CheckConfig(physics=physics))
    for error in report.errors:
        say(("error", "red"), f" {error}")
    for warning in report.warnings:
        say(("warning", "yellow"), f" {warning}")
    if plot is not None and report.probes:
        plot_probes(report, plot)
    style = "green" if report.verdict else "red"
    say((report.verdict_line, f"bold {style}"))
    if not report.verdict:
        raise typer.Exit(1)


@app.command()
@user_errors
def info(path: Annotated[Path, typer.Argument(help="A capture workspace folder, or a twin .usda/.usdz.")]) -> None:
    """Show what a workspace holds (each stage's status and figures), or summarise a twin USD file.

    Example: twinscan info cell_twin      twinscan info cell_twin/twin.usda
    """
    if path.suffix in (".usd", ".usda", ".usdc", ".usdz"):
        print_usd_summary(path)
    else:
        print_workspace_info(Workspace(path))


app.command(name="report")(report_command)
app.command(name="batch")(batch_command)
from twinscan.cli.view import view as view_command  # noqa: E402
app.command(name="view")(view_command)
from twinscan.cli.render import render as render_command  # noqa: E402
app.command(name="render")(render_command)


def main() -> None:
    init_runtime()  # before torch or numba load (no module above imports them)
    app()


if __name__ == "__main__":
    main()
