"""A finished capture workspace read for rendering: its splats, its surfaces and its capture cameras."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trimesh

from twinscan import layout
from twinscan.camera import world_from_cam_matrix
from twinscan.errors import TwinscanError
from twinscan.gaussians import Gaussians, read_ply
from twinscan.recon.splats.record import read_splats_record
from twinscan.render.geometry import SurfaceCaster, structure_parts
from twinscan.workspace import Workspace, fingerprint


@dataclass(frozen=True)
class CaptureCameras:
    """The registered capture frames, name order: what the capture saw, and the splats' held-out views."""

    names: list[str]
    Ks: np.ndarray  # (N, 3, 3) at (width, height)
    world_from_cam: np.ndarray  # (N, 4, 4) OpenCV axes
    width: int
    height: int
    heldout: np.ndarray  # (N,) bool: held out of splat training (the splats stage's record names them)


@dataclass(frozen=True)
class RenderTwin:
    root: Path
    splats: Gaussians  # the cell and, where kept, the background behind it (RGB needs both)
    surface: SurfaceCaster  # depth and (filtered) normals: the visual mesh, the planar patches and the floor slab
    parts: SurfaceCaster  # the collider above the floor, as twin.usda's UsdPhysics prims load
    part_of_face: np.ndarray  # per face of parts.mesh: its connected part, 1 = largest
    colliders: SurfaceCaster  # every collider (the slab too): where a camera must not be
    capture: CaptureCameras
    inputs: dict[str, str]  # fingerprints of what a dataset was rendered from

    @property
    def part_count(self) -> int:
        return int(self.part_of_face.max(initial=0))


def _need(root: Path, relative: str, stage: str) -> Path:
    path = root / relative
    if not path.exists():
        raise TwinscanError(f"{path} is missing: rendering needs a finished twin",
                            f"run `twinscan {stage} {root}` (or `twinscan capture`) first")
    return path


def capture_cameras(root: Path, heldout_views: tuple[str, ...]) -> CaptureCameras:
    import pycolmap

    model = pycolmap.Reconstruction(_need(root, layout.UNDISTORTED_CAMERAS, "sfm"))
    images = sorted((im for im in model.images.values() if im.has_pose), key=lambda im: im.name)
    if not images:
        raise TwinscanError(f"{root / layout.UNDISTORTED_CAMERAS} has no registered frame",
                            f"run `twinscan sfm {root} --force`")
    camera = model.cameras[images[0].camera_id]
    world_from_cam = np.stack([world_from_cam_matrix(im) for im in images])
    names = [im.name for im in images]
    return CaptureCameras(names, np.stack([camera.calibration_matrix()] * len(images)), world_from_cam,
                          int(camera.width), int(camera.height), np.isin(names, heldout_views))


def load_render_twin(root: Path) -> RenderTwin:
    """Read what rendering needs from a finished workspace. Raises TwinscanError naming the missing stage."""
    from pxr import Usd

    from twinscan.check.colliders import collider_surface

    root = Path(root)
    if not (root / layout.MANIFEST).is_file():
        raise TwinscanError(f"{root} is not a twinscan workspace (no manifest.json)",
                            "give the OUT folder of `twinscan capture`")
    cell = read_ply(_need(root, layout.SPLATS_PLY, "splats"))
    splats = cell
    if (root / layout.BACKGROUND_PLY).is_file():
        back = read_ply(root / layout.BACKGROUND_PLY)
        if back.sh_degree == cell.sh_degree and back.count:
            splats = Gaussians(*(np.concatenate([getattr(cell, k), getattr(back, k)])
                                 for k in ("means", "log_scales", "quats", "opacity_logits", "sh")))
    visual = trimesh.load(_need(root, layout.VISUAL_OBJ, "mesh"), force="mesh", process=False)
    # the planar patches and the floor slab are flat: their faces' own normals
    flat_parts = [trimesh.load(root / name, force="mesh", process=False) for name in (layout.PLANES, layout.FLOOR)
                  if (root / name).is_file()]
    surface = trimesh.util.concatenate([visual, *flat_parts]) if flat_parts else visual
    flat = np.arange(len(surface.faces)) >= len(visual.faces)
    stage = Usd.Stage.Open(str(_need(root, layout.TWIN, "usd")))
    collider = collider_surface(stage)
    structure, part_of_face = structure_parts(collider)
    heldout_views = read_splats_record(Workspace(root)).heldout_views
    inputs = {name: fingerprint(root / name) for name in (layout.SPLATS_PLY, layout.VISUAL_OBJ, layout.TWIN)}
    return RenderTwin(root, splats, SurfaceCaster(surface, flat=flat, filter_normals=True), SurfaceCaster(structure),
                      part_of_face, SurfaceCaster(collider), capture_cameras(root, heldout_views), inputs)
