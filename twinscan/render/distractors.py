"""Distractor boxes: random textured boxes stood on the floor in front of a view, clear of the colliders,
and rendered into the same view's RGB, depth, normals and masks (one ray cast decides all of them)."""

from __future__ import annotations

import functools
import math

import numpy as np
import trimesh

from twinscan.render.geometry import Hits, Rays, SurfaceCaster
from twinscan.render.randomize import Distractor, linear_to_srgb
from twinscan.render.twin import RenderTwin
from twinscan.synth.textures import make_texture

SIZE_M = (0.15, 0.7)  # side lengths drawn in this range
DISTANCE_M = (1.0, 4.0)  # in front of the camera, along the floor
TRIES = 20  # placements tried per box before it is left out
AMBIENT, SUN = 0.55, 0.45  # the boxes' own shading, close to the splats' baked light
SUN_DIRECTION = np.array([0.3, 0.2, 0.93]) / np.linalg.norm([0.3, 0.2, 0.93])


def box_mesh(box: Distractor) -> trimesh.Trimesh:
    mesh = trimesh.creation.box(extents=box.size)
    yaw = math.radians(box.yaw_deg)
    transform = trimesh.transformations.rotation_matrix(yaw, (0, 0, 1))
    transform[:3, 3] = (*box.centre_xy, box.size[2] / 2)
    mesh.apply_transform(transform)
    return mesh


def placer(twin: RenderTwin, world_from_cam: np.ndarray, hfov_deg: float):
    """`place(rng, count)`: boxes on the floor ahead of this camera, inside its horizontal field of view,
    not touching the colliders above the floor, the camera or each other."""
    eye = world_from_cam[:3, 3]
    forward = world_from_cam[:3, 2].copy()
    forward[2] = 0.0
    heading = math.atan2(forward[1], forward[0]) if np.linalg.norm(forward) > 1e-6 else 0.0

    def place(rng: np.random.Generator, count: int) -> list[Distractor]:
        boxes: list[Distractor] = []
        for _ in range(count):
            for _ in range(TRIES):
                size = rng.uniform(*SIZE_M, 3)
                angle = heading + math.radians(rng.uniform(-0.4, 0.4) * hfov_deg)
                distance = rng.uniform(*DISTANCE_M)
                centre = eye[:2] + distance * np.array([math.cos(angle), math.sin(angle)])
                box = Distractor((float(centre[0]), float(centre[1])), tuple(float(s) for s in size),
                                 float(rng.uniform(0, 180)), tuple(tuple(float(c) for c in rng.uniform(0.03, 0.8, 3))
                                                                   for _ in range(2)), int(rng.integers(0, 2**31)))
                if _is_free(twin, box, eye, boxes):
                    boxes.append(box)
                    break
        return boxes

    return place


def _is_free(twin: RenderTwin, box: Distractor, eye: np.ndarray, placed: list[Distractor]) -> bool:
    mesh = box_mesh(box)
    samples = np.concatenate([mesh.vertices, mesh.triangles_center, [mesh.centroid]])
    radius = 0.5 * float(np.linalg.norm(box.size))
    if np.linalg.norm(mesh.centroid - eye) < radius + 0.3:
        return False
    if len(twin.parts.mesh.faces) and (twin.parts.distance(samples).min() < 0.05 or twin.parts.inside(samples).any()):
        return False
    return all(np.linalg.norm(np.subtract(box.centre_xy, other.centre_xy))
               > 0.5 * (np.linalg.norm(box.size[:2]) + np.linalg.norm(other.size[:2])) for other in placed)


@functools.lru_cache(maxsize=64)
def _texture(seed: int):
    return make_texture(np.random.default_rng(seed), size=128, texel_m=0.004)


def render_distractors(boxes: tuple[Distractor, ...], rays: Rays) -> tuple[Hits, np.ndarray, np.ndarray]:
    """(hits, which box per pixel (-1: none), sRGB colour (H, W, 3) uint8) of the boxes alone."""
    meshes = [box_mesh(box) for box in boxes]
    boxes_mesh = trimesh.util.concatenate(meshes) if meshes else trimesh.Trimesh()
    hits = SurfaceCaster(boxes_mesh, flat=np.ones(len(boxes_mesh.faces), bool)).cast_rays(rays)
    box_of = np.where(hits.face >= 0, hits.face // 12, -1)  # trimesh boxes have 12 triangles each
    colour = np.zeros((rays.height, rays.width, 3), np.uint8)
    for b, box in enumerate(boxes):
        sel = box_of == b
        if not sel.any():
            continue
        points, normals = hits.points[sel], hits.normal[sel]
        yaw = math.radians(box.yaw_deg)
        local = points - (*box.centre_xy, 0.0)
        along = local[:, 0] * math.cos(yaw) + local[:, 1] * math.sin(yaw)
        across = -local[:, 0] * math.sin(yaw) + local[:, 1] * math.cos(yaw)
        top = np.abs(normals[:, 2]) > 0.5
        side = np.abs(normals[:, 0] * math.cos(yaw) + normals[:, 1] * math.sin(yaw)) > 0.5
        u = np.where(top | ~side, along, across)
        v = np.where(top, across, local[:, 2])
        texels = _texture(box.texture_seed).sample(u.astype(np.float32), v.astype(np.float32))
        paint = np.asarray(box.colours[0]) * (1 - texels[:, :1]) + np.asarray(box.colours[1]) * texels[:, :1]
        light = AMBIENT + SUN * np.clip(normals @ SUN_DIRECTION, 0, None)
        colour[sel] = np.clip(linear_to_srgb(paint * texels[:, 1:] * light[:, None]) * 255 + 0.5, 0, 255)
    return hits, box_of, colour
