"""Which workspace a `twinscan view` argument names: OUT/ itself, or OUT/twin.usda(z) inside it."""

from __future__ import annotations

from pathlib import Path

from twinscan.errors import TwinscanError
from twinscan.layout import MANIFEST, SPLATS_PLY

USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")


def workspace_root(path: Path) -> Path:
    """The capture workspace `path` is, or holds `path` (a twin layer at its top); refuse anything else."""
    path = Path(path)
    if not path.exists():
        raise TwinscanError(f"{path} does not exist", "pass a capture workspace folder (OUT) or its OUT/twin.usda")
    root = path.parent if path.is_file() else path
    if path.is_file() and path.suffix not in USD_SUFFIXES:
        raise TwinscanError(f"{path} is not a twin or a workspace",
                            "pass a capture workspace folder (OUT) or its OUT/twin.usda")
    if not (root / MANIFEST).is_file():
        raise TwinscanError(f"{root} is not a twinscan workspace (no {MANIFEST})",
                            "pass the folder made by `twinscan capture VIDEO -o OUT` (twin.usda must sit in it)")
    if not (root / SPLATS_PLY).is_file():
        raise TwinscanError(f"{root} has no splats ({SPLATS_PLY} is missing)",
                            f"run `twinscan splats {root}` (or `twinscan capture` again) first")
    return root
