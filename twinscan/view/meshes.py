"""The workspace's meshes for the viewer: the visual mesh (GLB bytes as written), the colliders and the
floor slab (triangles), and the colliders' colour: by per-face confidence where the mesh stage wrote
one, else one colour."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from twinscan.errors import TwinscanError

COLLIDER_RGB = (255, 140, 30)  # uniform collider colour when no confidence is recorded
FLOOR_RGB = (120, 160, 200)
CONFIDENCE_BINS = 5


@dataclass(frozen=True)
class Triangles:
    vertices: np.ndarray  # (V, 3) float32, twin frame
    faces: np.ndarray  # (F, 3) uint32

    @property
    def count(self) -> int:
        return len(self.faces)


@dataclass(frozen=True)
class ColouredPart:
    """Faces of one colour: the colliders are drawn as a few such parts (one per confidence band)."""

    label: str
    mesh: Triangles
    rgb: tuple[int, int, int]


def load_triangles(path: Path) -> Triangles | None:
    """The file's triangles (every geometry of a scene, concatenated), or None when the file is absent."""
    if not path.is_file():
        return None
    import trimesh

    try:
        mesh = trimesh.load(path, force="mesh", process=False)
    except Exception as error:  # trimesh raises many types on corrupt files
        raise TwinscanError(f"{path} cannot be read as a mesh ({error})",
                            "re-run `twinscan mesh` on the workspace (add --force)") from error
    return Triangles(np.asarray(mesh.vertices, np.float32), np.asarray(mesh.faces, np.uint32))


def load_confidence(path: Path, faces: int) -> np.ndarray | None:
    """Per-face confidence from `path` when it exists and matches the collider's face count."""
    if not path.is_file():
        return None
    values = np.load(path, allow_pickle=False).astype(np.float64).ravel()
    if len(values) != faces:
        raise TwinscanError(f"{path} holds {len(values)} confidences for {faces} collision faces",
                            "re-run `twinscan mesh` on the workspace (add --force)")
    return np.clip(np.nan_to_num(values, nan=0.0), 0.0, 1.0)


def confidence_rgb(value: float) -> tuple[int, int, int]:
    """Red (0: unsure) through yellow to green (1: sure)."""
    value = float(np.clip(value, 0.0, 1.0))
    red = 230 if value < 0.5 else int(round(230 * (1 - value) * 2))
    green = int(round(200 * value * 2)) if value < 0.5 else 200
    return red, green, 40


def collider_parts(colliders: Triangles, confidence: np.ndarray | None,
                   bins: int = CONFIDENCE_BINS) -> list[ColouredPart]:
    """One part in the uniform colour, or one per confidence band (its faces, coloured by its middle)."""
    if confidence is None:
        return [ColouredPart("colliders", colliders, COLLIDER_RGB)]
    band = np.minimum((confidence * bins).astype(int), bins - 1)
    parts = []
    for index in range(bins):
        faces = colliders.faces[band == index]
        if len(faces):
            low, high = index / bins, (index + 1) / bins
            parts.append(ColouredPart(f"confidence {low:.1f}-{high:.1f}", Triangles(colliders.vertices, faces),
                                      confidence_rgb((low + high) / 2)))
    return parts
