"""The factory cell: a textured floor with painted markings, oriented boxes, and a printed ArUco marker.

World frame: right-handed, Z up, metres, floor at z = 0. Every solid is an oriented box, so the renderer
and the exported triangle mesh describe exactly the same geometry.
"""

from __future__ import annotations

import colorsys
import functools
from dataclasses import dataclass, field

import cv2
import numpy as np
import trimesh
from scipy.spatial.transform import Rotation

from twinscan.errors import TwinscanError
from twinscan.recon.sfm.config import aruco_dictionary_id
from twinscan.recon.sfm.markers import marker_cells as pattern_cells
from twinscan.synth.textures import Texture, make_texture

FLOOR_HALF_SIZE_M = 4.5
BOX_TEXTURE_COUNT = 4
TEXEL_M = 0.004
# Textures are periodic; no surface may be longer than its texture's period, or the same pattern shows
# twice on it and SfM can place a view that sees only that surface one period away (it did, 8.2 m off).
FLOOR_TEXTURE_TEXELS = 2304  # 9.2 m across the 9 m floor
BOX_TEXTURE_TEXELS = 1280  # 5.1 m along the longest box, the 5 m low wall
PLAIN = -1  # surface_texture of a surface with no texture at all: one flat paint colour


@dataclass(frozen=True)
class Box:
    """An oriented box: `world_from_box` rotation about its centre, half extents along its own axes."""

    name: str
    center: tuple[float, float, float]
    size: tuple[float, float, float]
    yaw_deg: float = 0.0
    tilt_deg: float = 0.0  # rotation about the box's own x axis, after the yaw

    def world_from_box(self) -> np.ndarray:
        return Rotation.from_euler("zx", [self.yaw_deg, self.tilt_deg], degrees=True).as_matrix()


@dataclass(frozen=True)
class Marker:
    """A printed ArUco marker lying flat on the floor, its top edge towards +y rotated by `yaw_deg`."""

    dict_name: str
    id: int
    size_m: float  # side of the black square (what cv2.aruco calls the marker length)
    center_xy: tuple[float, float]
    yaw_deg: float
    cells: np.ndarray = field(repr=False)  # (n, n) bool, True = white, black border included

    @property
    def quiet_zone_m(self) -> float:
        """White paper margin around the black square: one cell wide."""
        return self.size_m / self.cells.shape[0]

    def world_from_marker(self) -> np.ndarray:
        """cv2.aruco marker frame: origin at the centre, x to the right, y to the top edge, z out of the print."""
        pose = np.eye(4)
        pose[:3, :3] = Rotation.from_euler("z", self.yaw_deg, degrees=True).as_matrix()
        pose[:2, 3] = self.center_xy
        return pose

    def corners_world(self) -> np.ndarray:
        """(4, 3) corners in cv2.aruco order: top-left, top-right, bottom-right, bottom-left."""
        h = self.size_m / 2
        local = np.array([[-h, h, 0, 1], [h, h, 0, 1], [h, -h, 0, 1], [-h, -h, 0, 1]])
        return (local @ self.world_from_marker().T)[:, :3]


@dataclass(frozen=True)
class Scene:
    boxes: tuple[Box, ...]
    marker: Marker
    floor_half_size_m: float
    textures: tuple[Texture, ...] = field(repr=False)
    surface_texture: np.ndarray = field(repr=False)  # (2 + B,) texture index per surface code, PLAIN: none
    surface_paint: np.ndarray = field(repr=False)  # (2 + B, 2, 3) linear RGB albedo of the two paint colours
    face_offsets_m: np.ndarray = field(repr=False)  # (B, 6, 2) texture offset of each box face: none repeat
    surface_gloss: np.ndarray | None = field(default=None, repr=False)  # (2 + B,) share of mirror-like reflection
    sun_direction: np.ndarray = field(default_factory=lambda: _unit([0.45, -0.3, 0.84]))

    @functools.cached_property
    def box_centers(self) -> np.ndarray:
        return np.array([b.center for b in self.boxes], dtype=np.float64)

    @functools.cached_property
    def box_half_extents(self) -> np.ndarray:
        return np.array([b.size for b in self.boxes], dtype=np.float64) / 2

    @functools.cached_property
    def box_rotations(self) -> np.ndarray:
        return np.stack([b.world_from_box() for b in self.boxes])

    @functools.cached_property
    def box_corners(self) -> np.ndarray:
        """(B, 8, 3) world corners of every box."""
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)
        local = signs[None] * self.box_half_extents[:, None]
        return self.box_centers[:, None] + np.einsum("bij,bkj->bki", self.box_rotations, local)


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def marker_cells(dict_name: str, marker_id: int) -> np.ndarray:
    dictionary = cv2.aruco.getPredefinedDictionary(aruco_dictionary_id(dict_name))
    if not 0 <= marker_id < dictionary.bytesList.shape[0]:
        raise TwinscanError(f"marker id {marker_id} is not in ArUco dictionary {dict_name}",
                            f"use an id from 0 to {dictionary.bytesList.shape[0] - 1}")
    return pattern_cells(dictionary, marker_id)


def cell_layout() -> tuple[Box, ...]:
    """A robot workcell inside a 2.5 m radius (the walkthrough loop passes outside it)."""
    boxes = [
        # CNC machine with a control cabinet and a chip conveyor
        Box("cnc_body", (-1.30, 1.20, 0.80), (1.20, 0.90, 1.60)),
        Box("cnc_top_unit", (-1.45, 1.30, 1.75), (0.60, 0.50, 0.30)),
        Box("control_cabinet", (-0.35, 1.85, 0.90), (0.50, 0.35, 1.80)),
        Box("chip_conveyor", (-0.45, 1.10, 0.35), (0.40, 0.50, 0.70)),
        # second machine, turned
        Box("press_body", (1.45, 1.15, 0.65), (1.00, 0.90, 1.30), yaw_deg=20),
        Box("press_head", (1.40, 1.05, 1.50), (0.50, 0.45, 0.40), yaw_deg=20),
        # robot on a pedestal, arm made of tilted links
        Box("robot_pedestal", (0.25, 0.35, 0.35), (0.55, 0.55, 0.70)),
        Box("robot_base", (0.25, 0.35, 0.85), (0.34, 0.34, 0.30), yaw_deg=30),
        Box("robot_upper_arm", (0.25, 0.22, 1.20), (0.16, 0.16, 0.62), tilt_deg=30),
        Box("robot_forearm", (0.25, -0.19, 1.40), (0.13, 0.52, 0.13), tilt_deg=-15),
        # workbench: top, legs, things on it
        Box("bench_top", (1.30, -1.30, 0.88), (1.60, 0.70, 0.05), yaw_deg=-30),
        *_bench_legs((1.30, -1.30), (1.60, 0.70), -30, 0.855),
        Box("toolbox", (1.05, -1.10, 1.01), (0.45, 0.22, 0.22), yaw_deg=-25),
        Box("parts_bin", (1.65, -1.55, 0.98), (0.30, 0.25, 0.15), yaw_deg=-40),
        # shelving with boxes
        *_shelving((-1.55, -1.15), 90),
        # pallet with crates (kept low so the marker stays in view)
        Box("pallet", (0.10, -2.05, 0.07), (1.00, 0.70, 0.14), yaw_deg=5),
        Box("crate_a", (-0.15, -2.05, 0.30), (0.45, 0.55, 0.32), yaw_deg=5),
        Box("crate_b", (0.35, -2.00, 0.26), (0.40, 0.45, 0.24), yaw_deg=12),
        # low wall section along the far edge of the floor
        Box("low_wall", (-0.50, 4.35, 0.60), (5.00, 0.12, 1.20)),
    ]
    return tuple(boxes)


def _bench_legs(center_xy, top_size_xy, yaw_deg, leg_height) -> list[Box]:
    rotation = Rotation.from_euler("z", yaw_deg, degrees=True).as_matrix()[:2, :2]
    legs = []
    for i, (sx, sy) in enumerate([(-1, -1), (1, -1), (1, 1), (-1, 1)]):
        offset = rotation @ np.array([sx * (top_size_xy[0] / 2 - 0.06), sy * (top_size_xy[1] / 2 - 0.06)])
        legs.append(Box(f"bench_leg_{i}", (center_xy[0] + offset[0], center_xy[1] + offset[1], leg_height / 2),
                        (0.05, 0.05, leg_height), yaw_deg=yaw_deg))
    return legs


def _shelving(center_xy, yaw_deg) -> list[Box]:
    rotation = Rotation.from_euler("z", yaw_deg, degrees=True).as_matrix()[:2, :2]
    width, depth, height = 1.30, 0.45, 1.80

    def at(local_x, local_y, z):
        x, y = np.asarray(center_xy) + rotation @ np.array([local_x, local_y])
        return (float(x), float(y), z)

    parts = [Box(f"shelf_post_{i}", at(sx * (width / 2 - 0.02), sy * (depth / 2 - 0.02), height / 2),
                 (0.04, 0.04, height), yaw_deg=yaw_deg)
             for i, (sx, sy) in enumerate([(-1, -1), (1, -1), (1, 1), (-1, 1)])]
    boards = (0.10, 0.75, 1.40)
    for i, z in enumerate(boards):
        parts.append(Box(f"shelf_board_{i}", at(0, 0, z), (width, depth, 0.03), yaw_deg=yaw_deg))
    stock = [  # (board, local x, width, depth, height, yaw offset)
        (0, -0.35, 0.40, 0.35, 0.30, 0), (0, 0.20, 0.30, 0.30, 0.40, 4), (1, -0.40, 0.30, 0.30, 0.25, -5),
        (1, 0.0, 0.25, 0.35, 0.35, 0), (1, 0.40, 0.30, 0.25, 0.20, 8), (2, -0.25, 0.45, 0.35, 0.28, 3),
        (2, 0.30, 0.30, 0.30, 0.22, -6),
    ]
    for i, (board, x, w, d, h, dyaw) in enumerate(stock):
        parts.append(Box(f"shelf_box_{i}", at(x, 0.0, boards[board] + 0.015 + h / 2), (w, d, h),
                         yaw_deg=yaw_deg + dyaw))
    return parts


def hard_layout() -> tuple[Box, ...]:
    """What makes real captures hard, added to the cell: a blank partition and a plain grey panel (no
    texture at all), a glossy cabinet and a glossy machine guard (their colour changes with the view), and
    tall walls behind the walkthrough loop on two sides, which an inward-looking loop sees only from
    across the cell (5.5 to 8.5 m away)."""
    return (
        Box("blank_partition", (-2.35, 0.15, 0.80), (0.06, 1.00, 1.60)),  # textureless
        Box("plain_panel", (0.60, 2.30, 0.60), (1.10, 0.05, 1.20)),  # textureless
        Box("glossy_cabinet", (2.20, -0.15, 0.90), (0.45, 0.80, 1.80)),  # glossy
        Box("glossy_guard", (-0.95, -2.25, 0.55), (0.90, 0.05, 1.10)),  # glossy and textureless: red lacquer
        Box("wall_east", (4.35, 0.00, 1.00), (0.12, 5.00, 2.00)),
        Box("wall_south", (0.00, -4.35, 1.00), (5.00, 0.12, 2.00)),
    )


PLAIN_BOXES = {"blank_partition": (0.50, 0.50, 0.48), "plain_panel": (0.30, 0.32, 0.36),
               "glossy_guard": (0.40, 0.03, 0.03)}  # one flat linear albedo each: no texture at all
GLOSSY_BOXES = {"glossy_cabinet": 0.55, "glossy_guard": 0.45}  # share of mirror-like reflection


@functools.lru_cache(maxsize=4)
def build_scene(seed: int = 0, marker_size_m: float = 0.30, marker_dict: str = "4x4_50",
                marker_id: int = 0, hard: bool = False) -> Scene:
    """The factory cell with textures drawn from `seed`; the layout is fixed (`hard` adds `hard_layout`).
    Cached: treat it as read-only."""
    if not 0.05 <= marker_size_m <= 1.0:
        raise TwinscanError(f"marker size {marker_size_m} m is out of range", "use a size between 0.05 and 1.0 m")
    rng = np.random.default_rng([seed, 2])
    boxes = cell_layout() + (hard_layout() if hard else ())
    marker = Marker(marker_dict, marker_id, marker_size_m, center_xy=(-0.40, -0.60), yaw_deg=0.0,
                    cells=marker_cells(marker_dict, marker_id))
    floor_texture = make_texture(rng, FLOOR_TEXTURE_TEXELS, TEXEL_M, blobs_per_m2=25.0)
    box_textures = tuple(make_texture(rng, BOX_TEXTURE_TEXELS, TEXEL_M) for _ in range(BOX_TEXTURE_COUNT))
    hues = (np.arange(len(boxes)) * 0.381966 + rng.random()) % 1.0  # golden-ratio spread of hues
    box_paint = [[_srgb_to_linear(colorsys.hsv_to_rgb(h, 0.65, 0.30)),
                  _srgb_to_linear(colorsys.hsv_to_rgb((h + 0.07) % 1.0, 0.40, 0.92))] for h in hues]
    background_paint = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    concrete_paint = [[0.16, 0.16, 0.17], [0.42, 0.40, 0.36]]
    surface_texture = np.concatenate([[0, 0], rng.integers(1, 1 + BOX_TEXTURE_COUNT, len(boxes))])
    gloss = np.zeros(2 + len(boxes), np.float32)
    for b, box in enumerate(boxes):
        if box.name in PLAIN_BOXES:
            surface_texture[2 + b] = PLAIN
            box_paint[b] = [PLAIN_BOXES[box.name]] * 2
        gloss[2 + b] = GLOSSY_BOXES.get(box.name, 0.0)
    return Scene(boxes=boxes, marker=marker, floor_half_size_m=FLOOR_HALF_SIZE_M,
                 textures=(floor_texture, *box_textures), surface_texture=surface_texture,
                 surface_paint=np.array([background_paint, concrete_paint, *box_paint], dtype=np.float32),
                 face_offsets_m=rng.uniform(0, box_textures[0].period_m, (len(boxes), 6, 2)),
                 surface_gloss=gloss if hard else None)


def _srgb_to_linear(rgb) -> np.ndarray:
    return np.asarray(rgb, dtype=np.float64) ** 2.2


def scene_mesh(scene: Scene) -> trimesh.Trimesh:
    """Every surface the renderer can hit, as one triangle mesh (metres, Z up): floor quad plus boxes."""
    h = scene.floor_half_size_m
    floor = trimesh.Trimesh(vertices=[[-h, -h, 0], [h, -h, 0], [h, h, 0], [-h, h, 0]],
                            faces=[[0, 1, 2], [0, 2, 3]], process=False)
    parts = [floor]
    for box in scene.boxes:
        transform = np.eye(4)
        transform[:3, :3] = box.world_from_box()
        transform[:3, 3] = box.center
        parts.append(trimesh.creation.box(extents=box.size, transform=transform))
    return trimesh.util.concatenate(parts)
