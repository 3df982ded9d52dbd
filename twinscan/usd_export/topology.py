"""Make a triangle soup a manifold, consistently wound surface before it goes into USD.

NVIDIA's Asset Validator (ManifoldChecker, VG.007) counts three defects that scanned meshes have and
that physics cookers and renderers dislike:
- an edge shared by more than two triangles (non-manifold edge);
- a vertex whose triangles are not one fan joined by such two-triangle edges (a "bowtie");
- two neighbouring triangles wound in opposite directions.
`manifold_surface` removes them: extra triangles on an overfull edge go (the smallest), each connected
piece is wound like the majority of its triangles, and a vertex is split into one copy per fan, each
copy moved a hair (SPLIT_NUDGE of the way to its fan's centre) so that no two points coincide (the
validator's WeldChecker would ask to merge them back). Nothing else moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

SPLIT_NUDGE = 0.01  # of the way from a split vertex to its fan's centroid (0.1-0.2 mm on a 1-2 cm mesh)
MAX_ROUNDS = 6


@dataclass(frozen=True)
class Surface:
    """The repaired mesh; `source[i]` is the input vertex that output vertex i came from (for UVs, colours)."""

    points: np.ndarray  # (V, 3) float32
    faces: np.ndarray  # (F, 3) int32
    source: np.ndarray  # (V,) int64
    removed_faces: int  # degenerate, duplicate or beyond two on one edge
    split_vertices: int  # extra copies made to separate fans
    flipped_faces: int


def manifold_surface(vertices: np.ndarray, faces: np.ndarray) -> Surface:
    points = np.asarray(vertices, dtype=np.float32)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    source = np.arange(len(points), dtype=np.int64)
    start = len(faces)
    faces = _drop_degenerate(points, faces)
    flipped = 0
    for round_index in range(MAX_ROUNDS):
        faces = _drop_overfull_edges(points, faces)
        faces, flips = _orient(faces)
        flipped += flips
        conflicts = _conflicting_faces(faces)
        if round_index >= 2 and conflicts.size:  # a non-orientable loop: splitting did not separate it
            faces = np.delete(faces, conflicts[:1], axis=0)
            continue
        points, faces, source = _split_fans(points, faces, source)
        if not _conflicting_faces(faces).size and not _overfull(faces).size:
            break
    used = np.unique(faces)
    remap = np.full(len(points), -1, np.int64)
    remap[used] = np.arange(len(used))
    counts = np.bincount(source[used], minlength=len(vertices))
    return Surface(points[used], remap[faces].astype(np.int32), source[used], start - len(faces),
                   int(np.sum(np.maximum(counts - 1, 0))), flipped)


def vertex_normals(points: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area-weighted unit normals, shared by points at the same position (smooth across UV seams)."""
    points64 = np.asarray(points, np.float64)
    corners = points64[faces]
    face_normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])  # length = 2 * area
    _, welded = np.unique(np.asarray(points, np.float32), axis=0, return_inverse=True)
    welded = welded.ravel()
    sums = np.zeros((welded.max(initial=-1) + 1, 3))
    for k in range(3):
        np.add.at(sums, welded[faces[:, k]], face_normals)
    normals = sums[welded]
    length = np.linalg.norm(normals, axis=1, keepdims=True)
    return np.where(length > 0, normals / np.where(length > 0, length, 1.0), [0.0, 0.0, 1.0]).astype(np.float32)


def _drop_degenerate(points: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Triangles with a repeated corner or no area (in float32, as stored), and repeated triangles."""
    distinct = (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])
    corners = points[faces].astype(np.float64)
    area2 = np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)
    faces = faces[distinct & (area2 > 1e-12)]
    _, first = np.unique(np.sort(faces, axis=1), axis=0, return_index=True)
    return faces[np.sort(first)]


def _edges(faces: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per half-edge (face-major, corner k to k+1): its undirected edge id, its face, and whether it runs
    from the lower to the higher vertex index; plus each edge's number of half-edges."""
    tails = faces.ravel()
    heads = np.roll(faces, -1, axis=1).ravel()
    keys = np.minimum(tails, heads) * (int(faces.max(initial=0)) + 1) + np.maximum(tails, heads)
    _, edge, count = np.unique(keys, return_inverse=True, return_counts=True)
    return edge.ravel(), np.repeat(np.arange(len(faces)), 3), tails < heads, count


def _overfull(faces: np.ndarray) -> np.ndarray:
    edge, _, _, count = _edges(faces)
    return np.flatnonzero(count > 2)


def _drop_overfull_edges(points: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Keep the two largest triangles on every edge that more than two share."""
    while True:
        edge, face, _, count = _edges(faces)
        crowded = count[edge] > 2
        if not crowded.any():
            return faces
        corners = points[faces].astype(np.float64)
        area = np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)
        half = np.flatnonzero(crowded)
        order = np.lexsort((-area[face[half]], edge[half]))  # by edge, largest first
        half = half[order]
        rank = np.arange(len(half)) - np.searchsorted(edge[half], edge[half])
        faces = np.delete(faces, np.unique(face[half[rank >= 2]]), axis=0)


def _pairs(faces: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The two faces of every two-face edge, and whether they run the edge the same way (misfit)."""
    edge, face, forward, count = _edges(faces)
    half = np.flatnonzero(count[edge] == 2)
    half = half[np.argsort(edge[half], kind="stable")]
    a, b = half[0::2], half[1::2]
    return face[a], face[b], forward[a] == forward[b]


def _orient(faces: np.ndarray) -> tuple[np.ndarray, int]:
    """Wind every connected piece (joined by two-face edges) like the majority of its triangles."""
    if not len(faces):
        return faces, 0
    a, b, same = _pairs(faces)
    n = len(faces)
    graph = coo_matrix((np.where(same, 2, 1), (a, b)), shape=(n, n)).tocsr()
    graph = graph + graph.T
    pieces, label = connected_components(graph, directed=False)
    # Depth-first over each piece: a neighbour across a misfit edge (weight 2) gets the opposite flip.
    indptr, neighbours, misfit = graph.indptr.tolist(), graph.indices.tolist(), (graph.data == 2).tolist()
    flip_list, seen = [False] * n, [False] * n
    for root in range(n):
        if seen[root]:
            continue
        seen[root] = True
        stack = [root]
        while stack:
            node = stack.pop()
            for j in range(indptr[node], indptr[node + 1]):
                other = neighbours[j]
                if not seen[other]:
                    seen[other] = True
                    flip_list[other] = flip_list[node] ^ misfit[j]
                    stack.append(other)
    flip = np.array(flip_list, dtype=bool)
    for piece in range(pieces):
        members = label == piece
        if flip[members].sum() * 2 > members.sum():
            flip[members] = ~flip[members]
    faces = faces.copy()
    faces[flip] = faces[flip][:, ::-1]
    return faces, int(flip.sum())


def _conflicting_faces(faces: np.ndarray) -> np.ndarray:
    if not len(faces):
        return np.zeros(0, np.int64)
    a, _, same = _pairs(faces)
    return np.unique(a[same])


def _split_fans(points: np.ndarray, faces: np.ndarray, source: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One vertex per fan: corners at the same vertex are joined across two-face, consistently wound edges."""
    n = len(faces)
    corner_of = np.arange(3 * n).reshape(n, 3)
    a, b, same = _pairs(faces)
    a, b = a[~same], b[~same]
    rows, cols = [], []
    for fa_k in range(3):
        for fb_k in range(3):
            hit = faces[a, fa_k] == faces[b, fb_k]  # a corner both faces have (the edge's endpoints)
            rows.append(corner_of[a[hit], fa_k])
            cols.append(corner_of[b[hit], fb_k])
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    graph = coo_matrix((np.ones(len(rows), np.int8), (rows, cols)), shape=(3 * n, 3 * n))
    _, fan = connected_components(graph, directed=False)
    vertex = faces.ravel()
    _, first, inverse = np.unique(fan, return_index=True, return_inverse=True)
    order = np.argsort(vertex[first], kind="stable")  # new vertices in the input's order
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    inverse, fan_vertex = rank[inverse.ravel()], vertex[first][order]
    fans = fan_vertex
    new_points = points[fan_vertex].astype(np.float64)
    copies = np.bincount(fan_vertex, minlength=len(points))
    split = copies[fan_vertex] > 1
    if split.any():
        centres = np.zeros((len(fans), 3))
        corner_centre = points[faces].astype(np.float64).mean(axis=1).repeat(3, axis=0)
        np.add.at(centres, inverse.ravel(), corner_centre)
        centres /= np.bincount(inverse.ravel(), minlength=len(fans))[:, None]
        new_points[split] += SPLIT_NUDGE * (centres[split] - new_points[split])
    return new_points.astype(np.float32), inverse.reshape(n, 3).astype(np.int64), source[fan_vertex]
