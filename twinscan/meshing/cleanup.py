"""From the raw marching-cubes surface to the captured scene: coverage, components, holes."""

from __future__ import annotations

import numpy as np
import trimesh
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from twinscan.meshing.views import DepthViews
from twinscan.meshing.raycast import raycasting_scene


def keep_faces(mesh: trimesh.Trimesh, keep: np.ndarray) -> trimesh.Trimesh:
    """A copy holding only the faces in `keep` (mask), without orphan vertices."""
    kept = mesh.copy()
    kept.update_faces(keep)
    kept.remove_unreferenced_vertices()
    return kept


def crop_to_captured(mesh: trimesh.Trimesh, views: DepthViews, min_views: int,
                     max_depth: float) -> tuple[trimesh.Trimesh, int]:
    """Keep faces whose corners all lie in at least `min_views` camera frusta: the captured region.

    (Floaters need no pass of their own: the TSDF grid carves them, since every view that looks
    past a floater's voxels integrates free space there.) Returns the mesh and the faces dropped.
    """
    in_frustum = np.zeros(len(mesh.vertices), np.int64)
    for i in range(len(views)):
        inside, _, _, z = views.pixels(i, mesh.vertices)
        in_frustum += inside & (z <= max_depth)
    outside = (in_frustum < min_views)[mesh.faces].any(axis=1)
    return keep_faces(mesh, ~outside), int(outside.sum())


def drop_below(mesh: trimesh.Trimesh, height: float) -> tuple[trimesh.Trimesh, int]:
    """Drop faces lying wholly below `height`: under a found floor the views saw nothing real, only
    splats that paint the dim far background near the horizon. Returns the mesh and the faces dropped."""
    below = (mesh.vertices[:, 2] < height)[mesh.faces].all(axis=1)
    return keep_faces(mesh, ~below), int(below.sum())


def keep_large_components(mesh: trimesh.Trimesh, min_area: float,
                          floor_band: float = 0.0) -> tuple[trimesh.Trimesh, int]:
    """Drop connected components with less than `min_area` square metres; return how many went.

    An absolute size, not a fraction of the largest: a scan's floor or walls are one huge
    component, and objects on shelves are separate ones a thousand times smaller. Pieces lying
    wholly within `floor_band` of z = 0 stay whatever their size: far floor seen at a grazing
    angle arrives in fragments.
    """
    if len(mesh.faces) == 0:
        return mesh, 0
    labels = trimesh.graph.connected_component_labels(mesh.face_adjacency, node_count=len(mesh.faces))
    area = np.bincount(labels, weights=mesh.area_faces)
    highest = np.zeros(len(area))
    np.maximum.at(highest, labels, np.abs(mesh.triangles_center[:, 2]))
    large = (area >= min_area) | (highest <= floor_band)
    return keep_faces(mesh, large[labels]), int((~large).sum())


def unsupported_components(mesh: trimesh.Trimesh, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """(face component labels, per component: floats) -- floating: neither resting on the floor
    (lowest point within `tolerance` of z = 0) nor touching, through others, a component that does.

    Components touch when their vertices come within ~`tolerance` (vertices binned in cells of that
    size; neighbouring occupied cells of two components link them).
    """
    if len(mesh.faces) == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    face_labels = trimesh.graph.connected_component_labels(mesh.face_adjacency, node_count=len(mesh.faces))
    count = int(face_labels.max()) + 1
    vertex_labels = np.zeros(len(mesh.vertices), np.int64)
    vertex_labels[mesh.faces.ravel()] = np.repeat(face_labels, 3)
    used = np.unique(mesh.faces.ravel())
    cells = np.floor(mesh.vertices[used] / tolerance).astype(np.int64)
    occupied = np.unique(np.column_stack([cells, vertex_labels[used]]), axis=0)
    labels = occupied[:, 3]
    pairs = cKDTree(occupied[:, :3].astype(np.float64)).query_pairs(r=1.8, output_type="ndarray")
    links = pairs[labels[pairs[:, 0]] != labels[pairs[:, 1]]]
    ground = count  # one extra node that every component resting on the floor links to
    lowest = np.full(count, np.inf)
    np.minimum.at(lowest, vertex_labels[used], mesh.vertices[used, 2])
    resting = np.flatnonzero(lowest <= tolerance)
    rows = np.concatenate([labels[links[:, 0]], resting])
    cols = np.concatenate([labels[links[:, 1]], np.full(len(resting), ground)])
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(count + 1, count + 1))
    _, group = connected_components(graph, directed=False)
    return face_labels, group[:count] != group[ground]


def drop_floating(mesh: trimesh.Trimesh, tolerance: float, max_area: float,
                  sfm_points: np.ndarray | None = None) -> tuple[trimesh.Trimesh, int]:
    """Remove components under `max_area` m2 that float in free space (see `unsupported_components`),
    unless the SfM points pin them (`pinned_components`).

    Larger floating parts are kept: they are structure whose supports the views missed (thin
    shelf posts), not floaters. So are smaller ones that SfM triangulated features on: a table top
    whose legs were too thin to fuse (a generated cell's bench, toolbox on it, went from the collider
    with 271 SfM points on its 0.93 m2). A splat floater is where SfM triangulated nothing. Returns how
    many went.
    """
    face_labels, floating = unsupported_components(mesh, tolerance)
    floating &= np.bincount(face_labels, weights=mesh.area_faces, minlength=len(floating)) < max_area
    if sfm_points is not None and floating.any():
        floating &= ~pinned_components(mesh, face_labels, sfm_points, tolerance)
    if not floating.any():
        return mesh, 0
    return keep_faces(mesh, ~floating[face_labels]), int(floating.sum())


FLOATING_PINNING = 5  # SfM points within the tolerance that pin a floating part (as they do a swept wall)
PINNED_DENSITY_SHARE = 0.1  # ... lying as densely as this share of the points on the whole mesh
# Measured (2026-12-07, docs/benchmarks.md session 41): the real parts the rule dropped held 60-290 SfM
# points/m2, against about 250-900/m2 over the whole captured surface (all points over its area); crumbs none.


def pinned_components(mesh: trimesh.Trimesh, face_labels: np.ndarray, points: np.ndarray,
                      tolerance: float) -> np.ndarray:
    """Per component of `face_labels`: pinned by `points`, at least FLOATING_PINNING of them within
    `tolerance` of it, as densely (per m2) as PINNED_DENSITY_SHARE of those on the whole mesh."""
    count = int(face_labels.max()) + 1
    if len(points) == 0:
        return np.zeros(count, bool)
    scene = raycasting_scene(mesh.vertices, mesh.faces)
    closest = scene.compute_closest_points(np.asarray(points, np.float32))
    near = np.linalg.norm(closest["points"].numpy() - points, axis=1) <= tolerance
    on = np.bincount(face_labels[closest["primitive_ids"].numpy()[near].astype(np.int64)], minlength=count)
    area = np.bincount(face_labels, weights=mesh.area_faces, minlength=count)
    density = on / np.maximum(area, 1e-12)
    return (on >= FLOATING_PINNING) & (density >= PINNED_DENSITY_SHARE * near.sum() / mesh.area)


def fill_small_holes(mesh: trimesh.Trimesh, max_perimeter: float) -> tuple[trimesh.Trimesh, int]:
    """Close each boundary loop shorter than `max_perimeter` metres with a fan around its centroid.

    (open3d's `fill_holes` returns NaN vertices on these meshes.) The fan follows the winding of
    the faces along the loop; the centroid takes the mean colour of the loop.
    """
    edges = mesh.faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2)
    directed = np.sort(edges[:, 0] * len(mesh.vertices) + edges[:, 1])  # the faces' edges, as sortable keys
    colours = np.asarray(mesh.visual.vertex_colors)
    centres, centre_colours, fans = [], [], []
    for entity in mesh.outline().entities if len(mesh.faces) else []:
        loop = np.asarray(entity.points)
        if loop[0] == loop[-1]:
            loop = loop[:-1]
        ring = mesh.vertices[loop]
        if len(loop) < 3 or np.linalg.norm(ring - np.roll(ring, -1, axis=0), axis=1).sum() > max_perimeter:
            continue
        key = loop[0] * len(mesh.vertices) + loop[1]
        if directed[min(np.searchsorted(directed, key), len(directed) - 1)] == key:  # run against the faces
            loop = loop[::-1]
        centre = len(mesh.vertices) + len(centres)
        centres.append(ring.mean(axis=0))
        centre_colours.append(colours[loop].mean(axis=0))
        fans.append(np.stack([loop, np.roll(loop, -1), np.full(len(loop), centre)], axis=1))
    if not fans:
        return mesh, 0
    added = np.concatenate(fans)
    filled = trimesh.Trimesh(np.concatenate([mesh.vertices, centres]), np.concatenate([mesh.faces, added]),
                             vertex_colors=np.concatenate([colours, np.asarray(centre_colours).astype(np.uint8)]),
                             process=False)
    return filled, len(added)
