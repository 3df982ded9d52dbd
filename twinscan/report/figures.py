"""Raster figures of the report: thumbnails, held-out comparisons, an oblique render of the meshes."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

ERROR_FULL_SCALE = 0.25  # mean absolute error (of 1) drawn at the top of the colour map
BACKGROUND_TOP, BACKGROUND_BOTTOM = np.array([250, 251, 253]), np.array([214, 221, 230])


def encode(rgb: np.ndarray, format: str = "JPEG", quality: int = 88) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb, dtype=np.uint8)).save(
        buffer, format=format, **({"quality": quality} if format == "JPEG" else {"optimize": True}))
    return buffer.getvalue()


def thumbnail(path: Path, height: int) -> bytes:
    """A JPEG `height` pixels high (the strip shows kept frames at a glance, not in detail)."""
    with Image.open(path) as image:
        image = image.convert("RGB")
        image.thumbnail((height * 4, height), Image.Resampling.LANCZOS)
        return encode(np.asarray(image), quality=82)


def fit_width(rgb: np.ndarray, max_width: int) -> np.ndarray:
    if rgb.shape[1] <= max_width:
        return rgb
    height = round(rgb.shape[0] * max_width / rgb.shape[1])
    return cv2.resize(rgb, (max_width, height), interpolation=cv2.INTER_AREA)


@dataclass(frozen=True)
class HeldoutView:
    """One held-out frame: the splats' render, the photo it was not trained on, and where they differ."""

    name: str
    render: np.ndarray
    truth: np.ndarray
    error: np.ndarray  # RGB colour map of the per-pixel mean absolute error
    psnr: float
    ssim: float


def error_map(render: np.ndarray, truth: np.ndarray) -> np.ndarray:
    difference = np.abs(render.astype(np.float32) - truth.astype(np.float32)).mean(axis=2) / 255.0
    level = np.clip(difference / ERROR_FULL_SCALE * 255, 0, 255).astype(np.uint8)
    return cv2.cvtColor(cv2.applyColorMap(level, cv2.COLORMAP_INFERNO), cv2.COLOR_BGR2RGB)


def heldout_view(side_by_side_png: Path) -> HeldoutView:
    """Split the splats stage's [render | ground truth] PNG and score it as the trainer does
    (twinscan's PSNR and SSIM), here on the 8-bit images."""
    import torch

    from twinscan.recon.splats.metrics import psnr, ssim

    with Image.open(side_by_side_png) as image:
        pair = np.asarray(image.convert("RGB"))
    width = pair.shape[1] // 2
    render, truth = pair[:, :width], pair[:, width:2 * width]
    a, b = (torch.from_numpy(x.astype(np.float32) / 255.0)[None] for x in (render, truth))
    return HeldoutView(side_by_side_png.stem, render, truth, error_map(render, truth), psnr(a, b),
                       float(ssim(a, b)))


@dataclass(frozen=True)
class MeshLayer:
    """A mesh to draw in one colour per face (N, 3) uint8."""

    vertices: np.ndarray
    faces: np.ndarray
    face_colours: np.ndarray


def oblique_camera(points: np.ndarray, width: int, height: int, azimuth_deg: float = -62.0,
                   elevation_deg: float = 38.0, margin: float = 0.06) -> tuple[np.ndarray, np.ndarray]:
    """(K, world_from_cam) of a camera above and to the side of `points` that frames their robust
    bounding box (2nd-98th percentiles, so stray floaters do not shrink the scene)."""
    from twinscan.camera import look_at

    low, high = np.percentile(points, [2, 98], axis=0)
    centre = (low + high) / 2
    radius = max(np.linalg.norm(high - low) / 2, 1e-6)
    azimuth, elevation = np.radians(azimuth_deg), np.radians(elevation_deg)
    direction = np.array([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth),
                          np.sin(elevation)])
    world_from_cam = look_at(centre + 3.0 * radius * direction, centre)
    corners = np.array([[x, y, z] for x in (low[0], high[0]) for y in (low[1], high[1]) for z in (low[2], high[2])])
    cam = (corners - world_from_cam[:3, 3]) @ world_from_cam[:3, :3]  # rows: corners in camera axes
    slopes = cam[:, :2] / cam[:, 2:3]
    lo, hi = slopes.min(axis=0), slopes.max(axis=0)
    focal = (1 - 2 * margin) * min(width / (hi[0] - lo[0]), height / (hi[1] - lo[1]))
    centre_slope = (lo + hi) / 2
    K = np.array([[focal, 0, width / 2 - focal * centre_slope[0]],
                  [0, focal, height / 2 - focal * centre_slope[1]], [0, 0, 1.0]])
    return K, world_from_cam


def shade(colour: np.ndarray, depth: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Lambert shading from normals of the depth map (light over the viewer's left shoulder), dark
    outlines where depth jumps, a soft gradient where nothing was hit."""
    height, width = depth.shape
    hit = np.isfinite(depth) & (depth > 0)
    v, u = np.mgrid[0:height, 0:width]
    rays = np.stack([u + 0.5, v + 0.5, np.ones_like(u)], -1) @ np.linalg.inv(K).T
    points = np.where(hit[..., None], rays * np.where(hit, depth, 0)[..., None], np.nan)
    filled = np.where(hit, depth, np.inf)
    jump = np.zeros_like(hit)
    with np.errstate(invalid="ignore"):  # nan and inf where rays miss: no normal, always an edge
        normals = np.cross(np.gradient(points, axis=1), np.gradient(points, axis=0))
        normals /= np.linalg.norm(normals, axis=-1, keepdims=True) + 1e-12
        normals *= -np.sign(np.sum(normals * points, axis=-1, keepdims=True))  # face the camera
        for axis in (0, 1):
            step = np.abs(np.diff(filled, axis=axis))
            edge = ~(step < 0.03 * np.minimum(np.delete(filled, 0, axis), np.delete(filled, -1, axis)))
            pad = [(0, 0), (0, 0)]
            pad[axis] = (0, 1)
            jump |= np.pad(edge, pad) | np.pad(edge, [(b, a) for a, b in pad])
    light = np.array([-0.45, -0.75, -1.0]) / np.linalg.norm([-0.45, -0.75, -1.0])
    lambert = np.nan_to_num(np.clip(normals @ light, 0, 1), nan=1.0)
    lit = colour.astype(np.float32) * (0.38 + 0.62 * lambert)[..., None]
    lit[jump & hit] *= 0.45
    rows = np.linspace(0, 1, height)[:, None, None]
    background = np.broadcast_to(BACKGROUND_TOP * (1 - rows) + BACKGROUND_BOTTOM * rows, colour.shape)
    return np.where(hit[..., None], lit, background).clip(0, 255).astype(np.uint8)


def render_layers(layers: list[MeshLayer], K: np.ndarray, world_from_cam: np.ndarray, width: int,
                  height: int) -> np.ndarray:
    """The layers ray-cast together (open3d, on the CPU) and shaded."""
    import trimesh

    from twinscan.meshing.raycast import render_mesh_views

    offsets = np.cumsum([0] + [len(layer.vertices) for layer in layers[:-1]])
    mesh = trimesh.Trimesh(np.concatenate([layer.vertices for layer in layers]),
                           np.concatenate([layer.faces + offset for layer, offset in zip(layers, offsets)]),
                           face_colors=np.concatenate([layer.face_colours for layer in layers]), process=False)
    views = render_mesh_views(mesh, K, world_from_cam[None], width, height)
    return shade(views.colour[0], views.depth[0], K)
