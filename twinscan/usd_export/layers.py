"""Writing USD files so that each appears complete or not at all."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from pxr import Usd, UsdGeom, UsdPhysics

from twinscan.atomic import atomic_path


@contextlib.contextmanager
def staged_usd_path(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling of `path` with the same extension; it replaces `path` on success.

    USD picks the file format by extension, so the temporary name has to keep it; being in the same
    folder, relative asset paths resolve from it as they will from the final file.
    """
    with atomic_path(path) as tmp:
        staged = tmp.with_name(tmp.name + path.suffix)
        try:
            yield staged
            os.replace(staged, tmp)
        finally:
            staged.unlink(missing_ok=True)


@contextlib.contextmanager
def new_stage(path: Path, default_prim: str) -> Iterator[Usd.Stage]:
    """Yield a fresh stage in the twin's units; its root layer is saved to `path` when the block succeeds."""
    with staged_usd_path(path) as staged:
        stage = Usd.Stage.CreateNew(str(staged))
        set_twin_units(stage)
        yield stage
        stage.SetDefaultPrim(stage.GetPrimAtPath(f"/{default_prim}"))
        stage.GetRootLayer().Save()


def set_twin_units(stage: Usd.Stage) -> None:
    """The twin frame's units (docs/CONVENTIONS.md): Z up, metres, kilograms."""
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
