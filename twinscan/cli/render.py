"""`twinscan render OUT -o DATASET`: labelled synthetic views of a finished twin, with domain randomization."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Optional

import typer

from twinscan.cli.errors import user_errors
from twinscan.cli.options import Device, DeviceChoice, Force
from twinscan.progress import progress_bar, say


@user_errors
def render(twin: Annotated[Path, typer.Argument(help="A finished capture workspace (the OUT of `twinscan capture`).")],
           out: Annotated[Path, typer.Option("--out", "-o", help="Dataset folder to write (resumed if unfinished).")],
           views: Annotated[int, typer.Option(help="How many views to render.")] = 100,
           path: Annotated[str, typer.Option(
               help="sampled (views a robot would have inside the captured cell), capture (the capture's own "
                    "frames) or the path of a nerfstudio transforms.json.")] = "sampled",
           heights: Annotated[str, typer.Option(
               help="Sampled camera heights: mobile (0.3-1.5 m), humanoid (1.5-1.8 m) or LOW-HIGH in metres.")]
           = "mobile",
           randomize: Annotated[str, typer.Option(help="Domain randomization: none, light or heavy.")] = "light",
           seed: Annotated[int, typer.Option(help="Seed of the sampled views and every randomized quantity.")] = 0,
           width: Annotated[int, typer.Option(help="Sampled views' width, pixels.")] = 640,
           height: Annotated[int, typer.Option(help="Sampled views' height, pixels.")] = 480,
           hfov: Annotated[float, typer.Option(help="Sampled views' horizontal field of view, degrees.")] = 70.0,
           workers: Annotated[int, typer.Option(help="Render on this many local Ray workers (1: in this process).")]
           = 1,
           address: Annotated[Optional[str], typer.Option(
               help="Render on the Ray cluster at this address (HEAD:6379); every node needs the twin and -o at "
                    "the same paths.")] = None,
           device: Device = DeviceChoice.auto, force: Force = False) -> None:
    """Render a labelled dataset from the twin: RGB (splats), metric depth, normals, floor/structure and
    collider-part masks, in nerfstudio's transforms.json layout (docs/render.md).

    Example: twinscan render cell_twin -o cell_data --views 1000 --randomize heavy
    """
    from twinscan.render import RenderConfig, render_dataset
    from twinscan.render.config import parse_heights

    config = RenderConfig(views=views, width=width, height=height, hfov_deg=hfov, path=path,
                          heights_m=parse_heights(heights), randomize=randomize, seed=seed)
    with contextlib.ExitStack() as stack:  # the bar opens once the plan knows how many views remain
        figures = render_dataset(twin, out, config, device=device.value, workers=workers, address=address, force=force,
                                 progress=lambda total: stack.enter_context(progress_bar("render", total)))
    rate = f", {figures['views_per_second']:.2f} views/s" if figures["views_per_second"] else ""
    say(("render", "bold green"), f" {figures['views']} views in {out} ({figures['rendered']} rendered now{rate}; "
        f"{figures['dataset_bytes'] / 1e6:.1f} MB, {figures['distractors']} distractor boxes; depth corroborated "
        f"on {100 * (figures['depth_agreed'] or 0):.0f} % of the pixels with depth: agreement/)")
