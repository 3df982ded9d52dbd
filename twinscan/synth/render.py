"""Ray casting of the factory cell: pinhole camera (OpenCV axes), z-depth, Lambertian shading.

Each pixel's ray is K^-1 [u, v, 1] (pixel centres at integer coordinates, as OpenCV), so the ray
parameter at a hit is the z-depth itself. The floor is one vectorized ray/plane test; each box gets an
analytic slab test over only the pixel rectangle its projected corners cover, in a small numba kernel
(numpy temporaries over those rectangles cost 5x more). Casting fills a G-buffer (depth, surface,
texture coordinates, normal); textures are sampled with cv2.remap, and one kernel shades every pixel.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from twinscan.synth.scene import PLAIN, Scene

NEAR_M = 0.05
BACKGROUND, FLOOR, FIRST_BOX = 0, 1, 2  # surface codes; box b has code FIRST_BOX + b
AMBIENT = 0.38
SUN = 0.75
PAINT_YELLOW = np.array([0.80, 0.55, 0.02], dtype=np.float32)
PAINT_WHITE = np.array([0.80, 0.80, 0.78], dtype=np.float32)
PAINT_BLACK = np.array([0.025, 0.025, 0.025], dtype=np.float32)
MARKER_WHITE = np.array([0.85, 0.85, 0.85], dtype=np.float32)
MARKER_BLACK = np.array([0.02, 0.02, 0.02], dtype=np.float32)


class Render(NamedTuple):
    rgb: np.ndarray  # (H, W, 3) uint8, sRGB, unit exposure, no noise
    depth: np.ndarray  # (H, W) float32 metres along the optical axis, inf where no surface


class CameraRays(NamedTuple):
    """Ray directions K^-1 [u, v, 1] of a zero-skew camera: x per column (1, W), y per row (H, 1)."""

    x: np.ndarray  # (1, W) float32
    y: np.ndarray  # (H, 1) float32

    @classmethod
    def of(cls, K: np.ndarray, width: int, height: int, pixel_offset=(0.0, 0.0)) -> CameraRays:
        """Rays through the pixel centres, or through points `pixel_offset` (du, dv) away from them."""
        if abs(K[0, 1]) > 1e-9:
            raise ValueError("the synthetic camera has zero skew")
        x = (np.arange(width) + pixel_offset[0] - K[0, 2]) / K[0, 0]
        y = (np.arange(height) + pixel_offset[1] - K[1, 2]) / K[1, 1]
        return cls(x[None, :].astype(np.float32), y[:, None].astype(np.float32))

    def along(self, matrix: np.ndarray, k: int) -> np.ndarray:
        """(H, W) component k of the rays turned by `matrix` (3x3)."""
        m = matrix[k].astype(np.float32)
        return m[0] * self.x + m[1] * self.y + m[2]


class GBuffer(NamedTuple):
    depth: np.ndarray  # (H, W) float32, inf where nothing is hit
    surface: np.ndarray  # (H, W) int16 surface code
    u: np.ndarray  # (H, W) float32 texture coordinates, metres (floor: world x, y)
    v: np.ndarray
    normal: np.ndarray  # (H, W, 3) float32 world normal


def cast_rays(scene: Scene, K: np.ndarray, world_from_cam: np.ndarray, rays: CameraRays) -> GBuffer:
    height, width = rays.y.shape[0], rays.x.shape[1]
    rotation = world_from_cam[:3, :3]
    origin = world_from_cam[:3, 3]
    g = GBuffer(np.full((height, width), np.inf, dtype=np.float32), np.zeros((height, width), dtype=np.int16),
                np.zeros((height, width), dtype=np.float32), np.zeros((height, width), dtype=np.float32),
                np.zeros((height, width, 3), dtype=np.float32))

    # floor: the plane z = 0 inside the floor square, seen from above
    if origin[2] > 0:
        dz = rays.along(rotation, 2)
        with np.errstate(divide="ignore", invalid="ignore"):  # rays parallel to the floor never meet it
            t = np.where(dz < 0, np.float32(-origin[2]) / dz, np.float32(np.inf))
            x = origin[0] + t * rays.along(rotation, 0)
            y = origin[1] + t * rays.along(rotation, 1)
        half = scene.floor_half_size_m
        on_floor = (t > NEAR_M) & (np.abs(x) <= half) & (np.abs(y) <= half)
        g.depth[on_floor] = t[on_floor]
        g.surface[on_floor] = FLOOR
        g.u[on_floor] = x[on_floor]
        g.v[on_floor] = y[on_floor]
        g.normal[on_floor] = (0.0, 0.0, 1.0)

    for b, corners in enumerate(scene.box_corners):
        rect = _screen_rect(K, world_from_cam, corners, width, height)
        if rect is not None:
            _cast_box(g, scene, b, rays, rotation, origin, rect)
    return g


def _cast_box(g: GBuffer, scene: Scene, b: int, rays: CameraRays, rotation, origin, rect) -> None:
    """Slab test of box b over a pixel rectangle; writes the G-buffer where the box is nearest."""
    box_rotation = scene.box_rotations[b]
    face_normals = np.concatenate([[-box_rotation[:, k], box_rotation[:, k]] for k in range(3)])  # (6, 3)
    _slab_kernel(rays.x[0], rays.y[:, 0], *rect, (box_rotation.T @ rotation).astype(np.float32),
                 (box_rotation.T @ (origin - scene.box_centers[b])).astype(np.float32),
                 scene.box_half_extents[b].astype(np.float32), scene.face_offsets_m[b].astype(np.float32),
                 face_normals.astype(np.float32), FIRST_BOX + b, g.depth, g.surface, g.u, g.v, g.normal)


@numba.njit(cache=True, nogil=True)
def _slab_kernel(xs, ys, v0, v1, u0, u1, box_from_cam, o, h, face_offsets, face_normals, code,
                 depth, surface, tex_u, tex_v, normal):  # pragma: no cover - compiled
    """Per pixel of the rectangle: ray into the box frame, slab test, z-buffer, face texture coordinates."""
    d = np.empty(3, dtype=np.float32)
    for row in range(v0, v1):
        for col in range(u0, u1):
            for k in range(3):
                d[k] = box_from_cam[k, 0] * xs[col] + box_from_cam[k, 1] * ys[row] + box_from_cam[k, 2]
            t_near, t_far, axis = -np.inf, np.inf, 0
            for k in range(3):
                if d[k] == 0.0:
                    if abs(o[k]) > h[k]:
                        t_far = -np.inf
                    continue
                t_a = (-h[k] - o[k]) / d[k]
                t_b = (h[k] - o[k]) / d[k]
                if t_a > t_b:
                    t_a, t_b = t_b, t_a
                if t_a > t_near:
                    t_near, axis = t_a, k
                t_far = min(t_far, t_b)
            if t_near > t_far or t_near <= NEAR_M or t_near >= depth[row, col]:
                continue
            face = 2 * axis + (1 if d[axis] < 0 else 0)  # the ray enters through the face it runs against
            depth[row, col] = t_near
            surface[row, col] = code
            tex_u[row, col] = o[(axis + 1) % 3] + t_near * d[(axis + 1) % 3] + face_offsets[face, 0]
            tex_v[row, col] = o[(axis + 2) % 3] + t_near * d[(axis + 2) % 3] + face_offsets[face, 1]
            for k in range(3):
                normal[row, col, k] = face_normals[face, k]


def _screen_rect(K, world_from_cam, corners, width, height):
    """Pixel rectangle (v0, v1, u0, u1) covering a box's projection; whole image if it reaches behind."""
    cam = (corners - world_from_cam[:3, 3]) @ world_from_cam[:3, :3]
    if (cam[:, 2] <= NEAR_M).all():
        return None
    if (cam[:, 2] < NEAR_M).any():
        return 0, height, 0, width
    pix = cam @ K.T
    uv = pix[:, :2] / pix[:, 2:3]
    u0 = max(int(np.floor(uv[:, 0].min())) - 1, 0)
    u1 = min(int(np.ceil(uv[:, 0].max())) + 2, width)
    v0 = max(int(np.floor(uv[:, 1].min())) - 1, 0)
    v1 = min(int(np.ceil(uv[:, 1].max())) + 2, height)
    if u0 >= u1 or v0 >= v1:
        return None
    return v0, v1, u0, u1


def shade(scene: Scene, g: GBuffer, world_from_cam: np.ndarray, rays: CameraRays) -> np.ndarray:
    """(H, W, 3) float32 linear radiance: painted albedo times (sky ambient + sun); background far away."""
    texel = np.zeros(g.u.shape + (2,), dtype=np.float32)
    texture_of_pixel = np.where(g.surface == BACKGROUND, -1, scene.surface_texture[g.surface]).ravel()
    u, v, texel_flat = g.u.ravel(), g.v.ravel(), texel.reshape(-1, 2)
    texel_flat[(texture_of_pixel == PLAIN) & (g.surface.ravel() != BACKGROUND), 1] = 1.0  # flat paint, no grain
    for i, texture in enumerate(scene.textures):
        mine = np.flatnonzero(texture_of_pixel == i)
        if len(mine):
            texel_flat[mine] = texture.sample(u[mine], v[mine])
    marker = scene.marker
    radiance = np.empty(g.u.shape + (3,), dtype=np.float32)
    gloss = scene.surface_gloss if scene.surface_gloss is not None else np.zeros(len(scene.surface_paint), np.float32)
    _shade_kernel(g.surface, g.u, g.v, g.normal, texel, scene.surface_paint, gloss,
                  scene.sun_direction.astype(np.float32), rays.x[0], rays.y[:, 0],
                  world_from_cam[:3, :3].astype(np.float32),
                  np.asarray(marker.center_xy, dtype=np.float32),
                  marker.world_from_marker()[:2, :2].astype(np.float32),
                  np.float32(marker.size_m), np.float32(marker.quiet_zone_m), marker.cells, radiance)
    return radiance


@numba.njit(cache=True, nogil=True)
def _shade_kernel(surface, tex_u, tex_v, normal, texel, paint, gloss, sun, xs, ys, world_from_cam_rot,
                  marker_center, world_from_marker_rot, marker_size, quiet_zone, marker_cells,
                  radiance):  # pragma: no cover - compiled
    height, width = surface.shape
    for row in range(height):
        for col in range(width):
            code = surface[row, col]
            if code == BACKGROUND:  # a dim hall far away: a gradient over elevation, the same from everywhere
                dx = world_from_cam_rot[0, 0] * xs[col] + world_from_cam_rot[0, 1] * ys[row] + world_from_cam_rot[0, 2]
                dy = world_from_cam_rot[1, 0] * xs[col] + world_from_cam_rot[1, 1] * ys[row] + world_from_cam_rot[1, 2]
                dz = world_from_cam_rot[2, 0] * xs[col] + world_from_cam_rot[2, 1] * ys[row] + world_from_cam_rot[2, 2]
                level = 0.10 + 0.08 * dz / np.sqrt(dx * dx + dy * dy + dz * dz)
                radiance[row, col, 0] = level
                radiance[row, col, 1] = level * 1.02
                radiance[row, col, 2] = level * 1.08
                continue
            pattern, detail = texel[row, col, 0], texel[row, col, 1]
            n_dot_sun = 0.0
            for k in range(3):
                n_dot_sun += normal[row, col, k] * sun[k]
            light = AMBIENT * (0.8 + 0.2 * normal[row, col, 2]) + SUN * max(n_dot_sun, 0.0)
            for k in range(3):
                albedo = (paint[code, 0, k] + (paint[code, 1, k] - paint[code, 0, k]) * pattern) * detail
                radiance[row, col, k] = albedo * light
            if gloss[code] > 0.0:
                _add_reflection(normal[row, col], xs[col], ys[row], world_from_cam_rot, sun, gloss[code],
                                radiance[row, col])
            if code == FLOOR:
                _paint_floor(tex_u[row, col], tex_v[row, col], pattern, detail, marker_center,
                             world_from_marker_rot, marker_size, quiet_zone, marker_cells, light,
                             radiance[row, col])


@numba.njit(cache=True, nogil=True)
def _add_reflection(n, x, y, world_from_cam_rot, sun, share, out):  # pragma: no cover - compiled
    """Lacquer: a share of the light is the hall mirrored in the surface (its windows, the sun's highlight),
    so the panel's colour changes with the viewpoint, as glossy paint does."""
    d = np.empty(3, dtype=np.float32)
    for k in range(3):
        d[k] = world_from_cam_rot[k, 0] * x + world_from_cam_rot[k, 1] * y + world_from_cam_rot[k, 2]
    norm = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
    d_dot_n = (d[0] * n[0] + d[1] * n[1] + d[2] * n[2]) / norm
    r = np.empty(3, dtype=np.float32)
    for k in range(3):
        r[k] = d[k] / norm - 2.0 * d_dot_n * n[k]
    # the hall's windows all round at eye height, and the sun: bright bands that slide over the panel as
    # the camera walks past (what makes a lacquered cabinet front hard to match between views)
    windows = 1.0 if abs(r[2]) < 0.45 and (np.arctan2(r[1], r[0]) * 4.0 / np.pi) % 1.0 < 0.3 else 0.0
    highlight = max(r[0] * sun[0] + r[1] * sun[1] + r[2] * sun[2], 0.0) ** 60
    mirrored = 0.06 + 0.06 * (r[2] + 1.0) + 0.85 * windows + 2.0 * highlight
    for k in range(3):
        out[k] = (1.0 - share) * out[k] + share * mirrored


@numba.njit(cache=True, nogil=True)
def _paint_floor(x, y, stain, grain, marker_center, world_from_marker_rot, marker_size, quiet_zone,
                 marker_cells, light, out):  # pragma: no cover - compiled
    """Lane markings, a hatched keep-out zone and the printed marker, painted over the concrete."""
    mx = (x - marker_center[0]) * world_from_marker_rot[0, 0] + (y - marker_center[1]) * world_from_marker_rot[1, 0]
    my = (x - marker_center[0]) * world_from_marker_rot[0, 1] + (y - marker_center[1]) * world_from_marker_rot[1, 1]
    half = marker_size / 2
    extent = max(abs(mx), abs(my))
    if extent <= half + quiet_zone:
        color = MARKER_WHITE
        if extent < half:
            n = marker_cells.shape[0]
            col = min(max(int((mx + half) / marker_size * n), 0), n - 1)
            row = min(max(int((half - my) / marker_size * n), 0), n - 1)
            if not marker_cells[row, col]:
                color = MARKER_BLACK
        for k in range(3):
            out[k] = color[k] * light
        return
    if stain <= 0.12:  # paint survives only where the floor is not worn through
        return
    ring = max(abs(x), abs(y))
    hatched = -0.20 < x < 0.95 and -0.30 < y < -0.02
    if hatched and ((x + y) / 0.10) % 1.0 < 0.5:
        for k in range(3):
            out[k] = PAINT_BLACK[k] * light
    elif hatched or 2.95 < ring < 3.05:
        for k in range(3):
            out[k] = PAINT_YELLOW[k] * grain * light
    elif abs(x + 2.55) < 0.03 and abs(y) < 2.2 and (y / 0.5) % 1.0 < 0.6:
        for k in range(3):
            out[k] = PAINT_WHITE[k] * grain * light


def render_radiance(scene: Scene, K: np.ndarray, world_from_cam: np.ndarray, width: int, height: int,
                    rays: CameraRays | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Linear radiance (H, W, 3) float32 and z-depth (H, W) float32 of one ideal pinhole image."""
    if rays is None:
        rays = CameraRays.of(K, width, height)
    g = cast_rays(scene, K, world_from_cam, rays)
    return shade(scene, g, world_from_cam, rays), g.depth


def linear_to_srgb8(radiance: np.ndarray) -> np.ndarray:
    """Display encoding (gamma 2.2) to uint8."""
    return (np.clip(radiance, 0.0, 1.0) ** (1 / 2.2) * 255.0 + 0.5).astype(np.uint8)


def pixel_grid_offsets(n: int) -> np.ndarray:
    """(n * n, 2) offsets of an n x n grid of samples spread evenly over a pixel (area sampling)."""
    steps = (np.arange(n) + 0.5) / n - 0.5
    return np.stack(np.meshgrid(steps, steps), axis=-1).reshape(-1, 2)


def render_frame(scene: Scene, K: np.ndarray, world_from_cam: np.ndarray, width: int, height: int,
                 samples: int = 2) -> Render:
    """One noise-free frame: sRGB uint8 and z-depth in metres (inf where no surface).

    Each pixel averages `samples` x `samples` rays over its area, as a sensor pixel integrates light
    (no aliasing, so edges land where the geometry says); depth is that of the ray through its centre.
    """
    radiance = sum(render_radiance(scene, K, world_from_cam, width, height, CameraRays.of(K, width, height, offset))[0]
                   for offset in pixel_grid_offsets(samples)) / samples ** 2
    depth = cast_rays(scene, K, world_from_cam, CameraRays.of(K, width, height)).depth
    return Render(linear_to_srgb8(radiance), depth)
