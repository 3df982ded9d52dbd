"""One labelled view of the twin: RGB from the splats; depth, normals, classes and collider parts from the
twin's surfaces; distractor boxes and the camera/light randomization applied consistently to all of them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from twinscan.gaussians import Gaussians
from twinscan.gaussians.model import SH_C0  # a shift of c in colour is c / SH_C0 in the DC term
from twinscan.gaussians.backend import RenderBackend, SplatRender, render_splats

from twinscan.render import geometry
from twinscan.render.cameras import View
from twinscan.render.config import RenderConfig
from twinscan.render.distractors import placer, render_distractors
from twinscan.render.randomize import Randomization, apply, draw
from twinscan.render.twin import RenderTwin

MAX_DEPTH_MM = 65535  # 16-bit PNG; farther surfaces are written as 0 (unknown), as nothing is


@dataclass(frozen=True)
class FrameImages:
    rgb: np.ndarray  # (H, W, 3) uint8 sRGB
    depth_mm: np.ndarray  # (H, W) uint16, z along the optical axis in millimetres, 0: no surface
    normals: np.ndarray  # (H, W, 3) uint8, world frame, round((n + 1) / 2 * 255), (0, 0, 0): no surface
    classes: np.ndarray  # (H, W) uint8: 0 nothing, 1 floor, 2 structure, 3 distractor
    instances: np.ndarray  # (H, W) uint16: collider part 1..P, distractor P+1.., 0 none
    agreement: np.ndarray  # (H, W) uint8: 255 where the depth is corroborated (`geometry.depth_agreement`), else 0
    depth_from_splats: float  # share of the pixels whose depth came from the splats (a hole in the mesh)
    depth_agreed: float  # share of the pixels with depth whose depth is corroborated


def normals_to_png(normals: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 `round((n + 1) / 2 * 255)` of unit normals where `drawn`, (0, 0, 0) elsewhere."""
    return np.where(drawn[..., None], np.round((normals + 1.0) * 127.5), 0).astype(np.uint8)


def normals_from_png(png: np.ndarray) -> np.ndarray:
    """Unit normals from `normals_to_png`'s image (RGB order), (0, 0, 0) where none was drawn. Normalized:
    8 bits put a decoded normal up to 0.7 % off unit length, and a dot product past 1, clipped, reads
    angles up to about 6 degrees as 0."""
    normals = png.astype(np.float64) / 127.5 - 1.0
    length = np.linalg.norm(normals, axis=-1, keepdims=True)
    return np.where(png.any(axis=-1, keepdims=True), normals / np.maximum(length, 1e-9), 0.0)


def render_splats_shifted(splats: Gaussians, view: View, dc_shift: tuple[float, float, float],
                          backend: RenderBackend) -> SplatRender:
    """The splats at the view, their colour (SH DC term) shifted by `dc_shift`."""
    if any(dc_shift):
        sh = splats.sh.copy()
        sh[:, 0, :] += np.asarray(dc_shift, np.float32) / SH_C0
        splats = dataclasses.replace(splats, sh=sh)
    return next(render_splats(splats, view.K[None], np.linalg.inv(view.world_from_cam)[None], view.width,
                              view.height, backend))


def render_frame(twin: RenderTwin, backend: RenderBackend, view: View, config: RenderConfig,
                 index: int) -> tuple[FrameImages, Randomization]:
    K, pose, width, height = view.K, view.world_from_cam, view.width, view.height
    hfov = float(np.degrees(2 * np.arctan(width / 2 / K[0, 0])))
    randomization = draw(config.randomize, config.seed, index, placer(twin, pose, hfov))
    splats = render_splats_shifted(twin.splats, view, randomization.dc_shift, backend)
    rgb = (splats.colour * 255 + 0.5).astype(np.uint8)
    rays = geometry.Rays.of(K, pose, width, height)
    mesh_hits = twin.surface.cast_rays(rays)
    hits, from_splats = geometry.fill_from_splats(mesh_hits, rays, splats.depth, splats.alpha)
    agreed = geometry.depth_agreement(mesh_hits.depth, splats.depth, splats.alpha)
    depth, normals = hits.depth.copy(), hits.normal.copy()
    classes = geometry.classes(hits)
    instances = geometry.part_ids(depth, twin.parts.cast_rays(rays), twin.part_of_face)
    if randomization.distractors:
        boxes, box_of, colour = render_distractors(randomization.distractors, rays)
        front = (box_of >= 0) & (boxes.depth < depth)
        depth[front], normals[front], rgb[front] = boxes.depth[front], boxes.normal[front], colour[front]
        classes[front] = geometry.DISTRACTOR
        agreed[front] = True  # drawn exactly
        instances[front] = (twin.part_count + 1 + box_of[front]).astype(np.uint16)
    rgb = apply(rgb, normals, randomization)
    depth_mm = np.where(np.isfinite(depth), np.round(depth * 1000.0), 0.0)
    depth_mm[depth_mm > MAX_DEPTH_MM] = 0
    hit = np.isfinite(depth)
    normal_png = normals_to_png(normals, hit)
    written = depth_mm > 0
    agreed &= written
    return (FrameImages(rgb, depth_mm.astype(np.uint16), normal_png, classes, instances,
                        np.where(agreed, 255, 0).astype(np.uint8), round(float(from_splats.mean()), 4),
                        round(float(agreed.sum() / max(int(written.sum()), 1)), 4)), randomization)
