"""The twin's surfaces as open3d ray-casting scenes: metric depth, normals, floor / structure classes and
the collider's parts, per pixel of a pinhole camera (OpenCV axes, pixel centres at +0.5 as COLMAP)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import trimesh

from twinscan.meshing.metrics import FLOOR_SPLIT_M
from twinscan.optional import open3d

NOTHING, FLOOR, STRUCTURE, DISTRACTOR = 0, 1, 2, 3  # classes of the mask image (0: no surface)
PART_AGREEMENT_M = 0.05  # a pixel belongs to a collider part when the part lies this close behind it ...
PART_AGREEMENT_SHARE = 0.03  # ... or this share of its depth, whichever is larger
SPLAT_DEPTH_ALPHA = 0.5  # the splats' median depth exists where their opacity passes this
# The depth is corroborated where the fused surface (every capture view's depth) and this view's own splat
# render agree within this distance or this share of the depth (the 5 cm of the geometry's F-score; 2 %
# is how far a splat render's depth scatters at 3-5 m). On hard seed 4's held-out frames 76 % of the
# covered pixels agree, 0.83 cm median and 5.5 cm p95 off the truth; the rest 3.7 cm and 200 cm.
AGREEMENT_M, AGREEMENT_SHARE = 0.05, 0.02
# A scanned surface's face normals are noisy at the scale of a few voxels; each face's normal becomes the
# area-weighted mean of the faces within this radius that turn less than this angle from it (twice): edges
# between surfaces stay sharp. On the sample's held-out frames, structure normals 10.5 -> 6.4 degrees
# median from the truth (docs/benchmarks.md, render).
NORMAL_FILTER_RADIUS_M = 0.10
NORMAL_FILTER_ANGLE_DEG = 45.0
NORMAL_FILTER_PASSES = 2


@dataclass(frozen=True)
class Hits:
    """One view's rays against one surface: (H, W) arrays."""

    depth: np.ndarray  # float32 z along the optical axis, inf where nothing is hit
    normal: np.ndarray  # (H, W, 3) float32 world-frame unit normals facing the camera, 0 where nothing
    face: np.ndarray  # int64 hit triangle, -1 where nothing
    points: np.ndarray  # (H, W, 3) float32 world-frame hit points (nan where nothing)


@dataclass(frozen=True)
class Rays:
    """A pinhole view's pixel rays in the world: camera z = 1 along each, so a hit's t is its depth."""

    origin: np.ndarray  # (3,) float32
    directions: np.ndarray  # (H*W, 3) float32
    width: int
    height: int

    @classmethod
    def of(cls, K: np.ndarray, world_from_cam: np.ndarray, width: int, height: int) -> Rays:
        x = ((np.arange(width) + 0.5 - K[0, 2]) / K[0, 0]).astype(np.float32)
        y = ((np.arange(height) + 0.5 - K[1, 2]) / K[1, 1]).astype(np.float32)
        rotation = np.asarray(world_from_cam[:3, :3], np.float32)
        directions = x[None, :, None] * rotation[:, 0] + y[:, None, None] * rotation[:, 1] + rotation[:, 2]
        return cls(np.asarray(world_from_cam[:3, 3], np.float32), directions.reshape(-1, 3), width, height)


def filtered_face_normals(mesh: trimesh.Trimesh, exact: np.ndarray, radius: float = NORMAL_FILTER_RADIUS_M,
                          max_angle_deg: float = NORMAL_FILTER_ANGLE_DEG,
                          passes: int = NORMAL_FILTER_PASSES) -> np.ndarray:
    """(F, 3) face normals with the scan noise filtered out (bilateral normal filtering: neighbours by
    distance, weighted by area, only those turning less than `max_angle_deg`); faces marked `exact`
    (flat parts built as planes) keep their own and lend nothing to others."""
    from scipy import sparse
    from scipy.spatial import cKDTree

    normals = np.array(mesh.face_normals, np.float64)
    noisy = np.flatnonzero(~exact)
    if len(noisy) < 2:
        return normals
    pairs = cKDTree(mesh.triangles_center[noisy]).query_pairs(radius, output_type="ndarray")
    rows = np.concatenate([pairs[:, 0], pairs[:, 1], np.arange(len(noisy))])
    cols = np.concatenate([pairs[:, 1], pairs[:, 0], np.arange(len(noisy))])
    own, area = normals[noisy], mesh.area_faces[noisy]
    current = own
    for _ in range(passes):
        agreement = np.einsum("ij,ij->i", current[rows], own[cols])  # scans are seen from both sides: by |cos|
        weight = np.where(np.abs(agreement) >= np.cos(np.radians(max_angle_deg)),
                          area[cols] * np.sign(agreement), 0.0)
        summed = sparse.csr_matrix((weight, (rows, cols)), shape=(len(noisy),) * 2) @ own
        current = summed / np.maximum(np.linalg.norm(summed, axis=1, keepdims=True), 1e-12)
    normals[noisy] = current
    return normals


class SurfaceCaster:
    """Ray casting of one triangle mesh (built once, cast for many views). Normals are each face's
    filtered normal (`filtered_face_normals`: a scan's raw face and vertex normals carry its noise), or
    with `filter_normals=False` the vertex normals interpolated across each face; faces marked `flat`
    (the floor slab, the planar patches: built as planes) always keep their own."""

    def __init__(self, mesh: trimesh.Trimesh, flat: np.ndarray | None = None, filter_normals: bool = False) -> None:
        o3d = open3d()
        self.mesh = mesh
        self._scene = o3d.t.geometry.RaycastingScene()
        if len(mesh.faces):
            self._scene.add_triangles(np.asarray(mesh.vertices, np.float32), np.asarray(mesh.faces, np.uint32))
        empty = np.zeros((0, 3), np.float32)
        self._flat = np.zeros(len(mesh.faces), bool) if flat is None else np.asarray(flat, bool)
        self._face_normals = np.asarray(mesh.face_normals, np.float32) if len(mesh.faces) else empty
        self._vertex_normals = np.asarray(mesh.vertex_normals, np.float32) if len(mesh.faces) else empty
        if filter_normals and len(mesh.faces):
            self._face_normals = filtered_face_normals(mesh, self._flat).astype(np.float32)
            self._flat = np.ones(len(mesh.faces), bool)  # every face now has its own (filtered) normal

    def cast(self, K: np.ndarray, world_from_cam: np.ndarray, width: int, height: int) -> Hits:
        return self.cast_rays(Rays.of(K, world_from_cam, width, height))

    def cast_rays(self, rays: Rays) -> Hits:
        origins = np.broadcast_to(rays.origin, rays.directions.shape)
        result = self._scene.cast_rays(np.concatenate([origins, rays.directions], 1))
        depth = result["t_hit"].numpy()
        face = result["primitive_ids"].numpy().astype(np.int64)
        hit = np.isfinite(depth)
        face[~hit] = -1
        normal = np.zeros((len(depth), 3), np.float32)
        hit_faces = face[hit]
        uv = result["primitive_uvs"].numpy()[hit]
        weights = np.stack([1.0 - uv.sum(axis=1), uv[:, 0], uv[:, 1]], axis=1)
        smooth = np.einsum("mk,mkj->mj", weights, self._vertex_normals[self.mesh.faces[hit_faces]])
        smooth /= np.maximum(np.linalg.norm(smooth, axis=1, keepdims=True), 1e-12)
        flat = self._flat[hit_faces] | ~np.isfinite(smooth).all(axis=1)
        normal[hit] = np.where(flat[:, None], self._face_normals[hit_faces], smooth)
        facing_away = np.einsum("ij,ij->i", normal, rays.directions) > 0
        normal[facing_away] *= -1  # scanned meshes are seen from both sides: face the camera
        points = np.full((len(depth), 3), np.nan, np.float32)
        points[hit] = rays.origin + rays.directions[hit] * depth[hit, None]
        shape = (rays.height, rays.width)
        return Hits(depth.reshape(shape), normal.reshape(*shape, 3), face.reshape(shape), points.reshape(*shape, 3))

    def distance(self, points: np.ndarray) -> np.ndarray:
        """Unsigned distance of each world point to the mesh (inf for an empty mesh)."""
        if not len(self.mesh.faces):
            return np.full(len(points), np.inf)
        o3d = open3d()
        return self._scene.compute_distance(o3d.core.Tensor(np.asarray(points, np.float32))).numpy()

    def inside(self, points: np.ndarray) -> np.ndarray:
        """Whether each point is enclosed by the mesh (ray parity over several rays: scanned meshes are
        not always closed, so a point counts as inside when most rays say so)."""
        if not len(self.mesh.faces):
            return np.zeros(len(points), bool)
        o3d = open3d()
        return self._scene.compute_occupancy(o3d.core.Tensor(np.asarray(points, np.float32)), nsamples=5).numpy() > 0.5


def splat_drawn(splat_depth: np.ndarray, splat_alpha: np.ndarray) -> np.ndarray:
    """Where the splats' median depth exists: opaque enough (SPLAT_DEPTH_ALPHA) and in front of the camera."""
    return (splat_alpha > SPLAT_DEPTH_ALPHA) & (splat_depth > 0)


def fill_from_splats(hits: Hits, rays: Rays, splat_depth: np.ndarray, splat_alpha: np.ndarray) -> tuple[Hits, np.ndarray]:
    """The mesh's hits, with the splats' depth where the mesh has no surface; normals there from the filled
    depth map's own gradient. Returns the hits and where the splats were used.
    Only in holes: away from the capture's path a view's splats render floaters in front of the mesh.
    Taking the splats wherever they lay 10 cm in front (the rule before) gave, on the sample / hard seed 4
    (docs/benchmarks.md, session 33), 24.6 / 20.6 % of the pixels more than 8 cm off at sampled mobile-robot
    views against 5.2 / 6.3 % now, 11.1 / 21.6 % at humanoid heights against 15.5 / 7.5, and 3.8 / 11.7 % at
    the held-out capture frames against 4.1 / 9.2."""
    use = splat_drawn(splat_depth, splat_alpha) & ~np.isfinite(hits.depth)
    depth = np.where(use, splat_depth, hits.depth).astype(np.float32)
    points = np.where(use[..., None], rays.origin + rays.directions.reshape(*depth.shape, 3) * depth[..., None],
                      hits.points).astype(np.float32)
    normal = hits.normal.copy()
    with np.errstate(invalid="ignore"):
        gradient = np.cross(np.gradient(points, axis=1), np.gradient(points, axis=0))
        length = np.linalg.norm(gradient, axis=-1, keepdims=True)
        estimated = np.nan_to_num(gradient / length)
    toward = np.einsum("hwk,hwk->hw", estimated, rays.directions.reshape(*depth.shape, 3)) > 0
    estimated[toward] *= -1
    normal[use] = estimated[use]
    face = np.where(use, -1, hits.face)
    return Hits(depth, normal, face, points), use


def depth_agreement(mesh_depth: np.ndarray, splat_depth: np.ndarray, splat_alpha: np.ndarray) -> np.ndarray:
    """(H, W) bool: where the mesh's depth and the splats' median depth agree (AGREEMENT_M, AGREEMENT_SHARE).
    Pixels whose depth the splats fill in (`fill_from_splats`: a hole in the mesh) never agree."""
    both = splat_drawn(splat_depth, splat_alpha) & np.isfinite(mesh_depth)
    with np.errstate(invalid="ignore"):
        return both & (np.abs(mesh_depth - splat_depth) <= np.maximum(AGREEMENT_M, AGREEMENT_SHARE * mesh_depth))


def structure_parts(collider: trimesh.Trimesh) -> tuple[trimesh.Trimesh, np.ndarray]:
    """The collider above the floor and, per face, its connected part (1, 2, ... largest area first)."""
    above = collider.vertices[collider.faces][:, :, 2].max(axis=1) > FLOOR_SPLIT_M
    structure = collider.submesh([np.flatnonzero(above)], append=True) if above.any() else trimesh.Trimesh()
    if not len(structure.faces):
        return structure, np.zeros(0, np.int64)
    labels = trimesh.graph.connected_component_labels(structure.face_adjacency, node_count=len(structure.faces))
    areas = np.bincount(labels, weights=structure.area_faces)
    rank = np.empty_like(np.argsort(-areas, kind="stable"))
    rank[np.argsort(-areas, kind="stable")] = np.arange(len(areas))
    return structure, rank[labels] + 1


def classes(hits: Hits) -> np.ndarray:
    """(H, W) uint8: FLOOR where the hit point is at most FLOOR_SPLIT_M high, STRUCTURE above, else NOTHING."""
    out = np.zeros(hits.depth.shape, np.uint8)
    hit = np.isfinite(hits.depth)
    height = np.where(hit, hits.points[..., 2], 0.0)
    out[hit & (height <= FLOOR_SPLIT_M)] = FLOOR
    out[hit & (height > FLOOR_SPLIT_M)] = STRUCTURE
    return out


def part_ids(depth: np.ndarray, part_hits: Hits, face_part: np.ndarray) -> np.ndarray:
    """(H, W) uint16 collider part seen at each pixel: the part the ray meets where the rendered surface
    is (within PART_AGREEMENT_M or PART_AGREEMENT_SHARE of the depth), else 0."""
    ids = np.zeros(depth.shape, np.uint16)
    hit = (part_hits.face >= 0) & np.isfinite(depth)
    tolerance = np.maximum(PART_AGREEMENT_M, PART_AGREEMENT_SHARE * np.where(hit, depth, 0.0))
    with np.errstate(invalid="ignore"):  # inf - inf where neither surface is hit
        agree = hit & (np.abs(part_hits.depth - depth) <= tolerance)
    ids[agree] = face_part[part_hits.face[agree]]
    return ids
