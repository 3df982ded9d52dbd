"""Metric scale from square fiducial markers (ArUco / AprilTag) seen in the frames.

Each marker corner is detected (sub-pixel) in every registered frame, triangulated over all its
views with the SfM poses, and the mean side length of the triangulated squares gives the scale.

Detection runs on linearised intensities: in gamma-encoded (sRGB) video a blurred black/white
edge reaches the mid grey on the black side, so the black square looks smaller, by about half a
pixel per edge; on a marker 30 px wide that alone is a 3% scale error.

Video compression then smooths edges in the gamma domain, which biases any edge-based corner the
other way (+0.8% side length on the sample's 30 px markers). So each detection is refined by
aligning the marker's known cell pattern to the image (OpenCV's ECC, a homography): every black
region grows or shrinks alike on all sides, the cells' centres do not move, and the fit over all
cells keeps the side unbiased (-0.04% on the sample, corners within 0.2 px instead of 0.9 px).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from twinscan.recon.sfm.config import aruco_dictionary_id

# OpenCV's AprilTag-style edge fit: on linearised synthetic frames its corners are unbiased
# (0.1% scale error at 30 px markers) where CORNER_REFINE_SUBPIX leaves 1.3%.
CORNER_REFINEMENT = "APRILTAG"
COLMAP_FROM_OPENCV_PIXELS = 0.5  # COLMAP puts pixel centres at +0.5, OpenCV at integers
# a corner seen in fewer frames is not triangulated. Two suffice: on the generated one-loop cell the
# marker is in 2 of 50 kept frames, and those two gave the scale within 0.07 % (3 left the twin unscaled)
MIN_VIEWS = 2
QUIET_ZONE_CELLS = 0.5  # white margin around the black square in the refinement's template: the
# printed margin is wider, but past half a cell the floor's blur would bleed into the template


def _srgb_to_linear_table() -> np.ndarray:
    v = np.arange(256) / 255.0
    return np.round(255 * np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)).astype(np.uint8)


SRGB_TO_LINEAR = _srgb_to_linear_table()


def marker_cells(dictionary, marker_id: int) -> np.ndarray:
    """(n, n) bool cell pattern, True = white, black border included (n = marker bits + 2)."""
    import cv2

    n = dictionary.markerSize + 2
    return cv2.aruco.generateImageMarker(dictionary, marker_id, n, borderBits=1) > 127


def refine_corners(linear_gray: np.ndarray, corners: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Corners (4, 2) of the black square, re-fitted by aligning its cell pattern (plus half a cell
    of white margin) to the linear-intensity image with a homography (cv2.findTransformECC).

    Falls back to the given corners when the alignment fails or wanders off (more than a quarter
    cell): a partly hidden marker, or one too small to carry its pattern.
    """
    import cv2

    n = len(cells)
    side_px = float(np.linalg.norm(corners - np.roll(corners, -1, axis=0), axis=1).mean())
    cell_px = int(np.clip(round(side_px / n), 8, 32))  # template pixels per cell
    margin = int(QUIET_ZONE_CELLS * cell_px)
    template = np.pad(np.kron(cells.astype(np.float32) * 255, np.ones((cell_px, cell_px), np.float32)),
                      margin, constant_values=255)
    low, high = margin - 0.5, margin + n * cell_px - 0.5  # black square's edges, pixel centres at integers
    square = np.array([[low, low], [high, low], [high, high], [low, high]], np.float32)
    initial = cv2.getPerspectiveTransform(square, corners.astype(np.float32)).astype(np.float32)
    criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 100, 1e-6)
    try:
        _, warp = cv2.findTransformECC(template, linear_gray.astype(np.float32), initial, cv2.MOTION_HOMOGRAPHY,
                                       criteria, None, 1)
    except cv2.error:
        return corners
    refined = cv2.perspectiveTransform(square[None], warp)[0].astype(np.float64)
    if np.abs(refined - corners).max() > 0.25 * side_px / n:
        return corners
    return refined


def detect_markers(image_paths: Iterable[tuple[str, Path]], dictionary: str) -> dict[str, dict[int, np.ndarray]]:
    """{image name: {marker id: (4, 2) corner pixels}} for each image where markers were found."""
    import cv2

    parameters = cv2.aruco.DetectorParameters()
    parameters.cornerRefinementMethod = getattr(cv2.aruco, f"CORNER_REFINE_{CORNER_REFINEMENT}")
    aruco_dictionary = cv2.aruco.getPredefinedDictionary(aruco_dictionary_id(dictionary))
    detector = cv2.aruco.ArucoDetector(aruco_dictionary, parameters)
    found: dict[str, dict[int, np.ndarray]] = {}
    for name, path in image_paths:
        gray = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
        if gray is None:
            continue
        linear = SRGB_TO_LINEAR[gray]
        corners, ids, _ = detector.detectMarkers(linear)
        if ids is not None and len(ids):  # OpenCV 4 returns None when it finds none, OpenCV 5 an empty array
            found[name] = {int(i): refine_corners(linear, c.reshape(4, 2).astype(np.float64),
                                                  marker_cells(aruco_dictionary, int(i)))
                           for i, c in zip(ids.ravel(), corners)}
    return found


def triangulate_markers(detections: dict[str, dict[int, np.ndarray]], reconstruction) -> dict[int, np.ndarray]:
    """{marker id: (4, 3) corners in the reconstruction's frame}, robustly over all views (pycolmap)."""
    import pycolmap

    images = {image.name: image for image in reconstruction.images.values() if image.has_pose}
    views: dict[int, list[tuple[np.ndarray, object]]] = defaultdict(list)
    for name, markers in detections.items():
        if name in images:
            for marker_id, corners in markers.items():
                views[marker_id].append((corners, images[name]))
    triangulated: dict[int, np.ndarray] = {}
    for marker_id, observations in views.items():
        if len(observations) < MIN_VIEWS:
            continue
        corners3d = []
        for k in range(4):
            result = pycolmap.estimate_triangulation(
                np.array([corners[k] for corners, _ in observations]) + COLMAP_FROM_OPENCV_PIXELS,
                [image.cam_from_world() for _, image in observations],
                [image.camera for _, image in observations])
            if result is None:
                break
            corners3d.append(np.asarray(result["xyz"]).ravel())
        if len(corners3d) == 4:
            triangulated[marker_id] = np.array(corners3d)
    return triangulated


def side_lengths(corners3d: np.ndarray) -> np.ndarray:
    """The four side lengths of a (4, 3) quadrilateral, corners in order."""
    return np.linalg.norm(corners3d - np.roll(corners3d, -1, axis=0), axis=1)


def metres_per_unit(markers: dict[int, np.ndarray], marker_size: float) -> float:
    """Scale that makes the mean triangulated side length equal to the printed side."""
    sides = np.concatenate([side_lengths(corners) for corners in markers.values()])
    return marker_size / float(sides.mean())
