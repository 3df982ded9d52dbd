"""Make a synthetic capture: `python -m twinscan.synth OUT [--preset sample|tiny] [--seed N]`.

The bundled sample is exactly `python -m twinscan.synth samples/factory_cell --preset sample`.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import typer

from twinscan.errors import TwinscanError
from twinscan.progress import console, progress_bar, say
from twinscan.synth.capture import PRESETS, make_capture

app = typer.Typer(add_completion=False, help=__doc__)


@app.command()
def main(out: Path = typer.Argument(..., help="folder to write video.mp4, ground_truth.json and scene.ply into"),
         preset: str = typer.Option("sample", help=f"capture settings: {', '.join(PRESETS)}"),
         seed: int | None = typer.Option(None, help="texture and walk seed (default: the preset's)"),
         rotation: int | None = typer.Option(None, help="display rotation 0/90/180/270 (default: the preset's)"),
         workers: int = typer.Option(1, help="render frames on this many processes (the same video, sooner)")) -> None:
    """Render a handheld walkthrough of a factory cell to an mp4 with exact ground truth.

    Example: python -m twinscan.synth samples/factory_cell --preset sample
    """
    try:
        if preset not in PRESETS:
            raise TwinscanError(f"unknown preset '{preset}'", f"use one of: {', '.join(PRESETS)}")
        cfg = PRESETS[preset]
        overrides = {k: v for k, v in dict(seed=seed, rotation_deg=rotation).items() if v is not None}
        cfg = dataclasses.replace(cfg, **overrides)
        start = time.perf_counter()
        with progress_bar("rendering", cfg.frame_count()) as advance:
            gt = make_capture(cfg, out, on_frame=lambda i: advance(), workers=workers)
        size_mb = sum(p.stat().st_size for p in Path(out).iterdir()) / 1e6
        console.print(f"{gt.frame_count} frames {gt.width}x{gt.height} in {time.perf_counter() - start:.0f} s, "
                      f"{size_mb:.1f} MB -> {out}")
    except TwinscanError as error:
        say(("error:", "red"), f" {error.one_line()}")
        raise typer.Exit(1) from None


if __name__ == "__main__":
    app()
