"""Metric scale from square fiducial markers (ArUco / AprilTag) seen in the frames.

Each marker corner is detected (sub-pixel) in every registered frame and triangulated over all its
views with the SfM poses (the twin's origin and axes); the scale is the median over the views of the
marker's distance from the camera in metres (from its printed size) over that distance in the model.

Detection runs on linearised intensities: in gamma-encoded (sRGB) video a blurred black/white
edge reaches the mid grey on the black side, so the black square looks smaller, by about half a
pixel per edge; on a marker 30 px wide that alone is a 3% scale error.

Video compression then smooths edges in the gamma domain, which biases any edge-based corner the
other way (+0.8% side length on the sample's 30 px markers). So each detection is refined by
aligning the marker's known cell pattern to the image (OpenCV's ECC, a homography): every black
region grows or shrinks alike on all sides, the cells' centres do not move, and the fit over all
cells keeps the side unbiased (-0.04% on the sample, corners within 0.2 px instead of 0.9 px) --
provided the pattern is blurred as the image is (`refine_corners`).
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
TEMPLATE_BLURS_PX = np.round(np.arange(0.0, 2.01, 0.1), 1)  # Gaussian sigmas, image pixels, tried on the template
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

    The template is blurred as the image is (`_template_blur_shape`), by the Gaussian in TEMPLATE_BLURS_PX whose
    alignment correlates best: a sharp template aligned to a blurred image pulls the square's corners
    in (a blurred convex corner loses its tip): markers 18-31 px wide at a slant came out 0.25 % small
    under a 0.45 px blur and 0.8 % under 0.9 px; matched, within 0.05 %.

    Falls back to the given corners when every alignment fails or wanders off (more than a quarter
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
    image = linear_gray.astype(np.float32)
    shape = _template_blur_shape(initial, (low + high) / 2)
    best, refined = -np.inf, corners
    for blur in TEMPLATE_BLURS_PX:
        blurred = _blurred(template, shape * blur ** 2)
        try:
            correlation, warp = cv2.findTransformECC(blurred, image, initial.copy(), cv2.MOTION_HOMOGRAPHY,
                                                     criteria, None, 1)
        except cv2.error:
            continue
        fitted = cv2.perspectiveTransform(square[None], warp)[0].astype(np.float64)
        if correlation > best and np.abs(fitted - corners).max() <= 0.25 * side_px / n:
            best, refined = correlation, fitted
    return refined


def _template_blur_shape(image_from_template: np.ndarray, centre: float) -> np.ndarray:
    """(2, 2) covariance in template pixels of a blur of one image pixel: through the homography's local
    linear map at the square's centre, so a marker seen at a slant (foreshortened along one axis) is
    blurred more along that axis of the template."""
    H = image_from_template.astype(np.float64)
    w = H[2] @ [centre, centre, 1.0]
    linear = (H[:2, :2] * w - np.outer(H[:2] @ [centre, centre, 1.0], H[2, :2])) / w ** 2  # d image / d template
    return np.linalg.inv(linear.T @ linear)


def _blurred(template: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """The template blurred by a Gaussian of this (2, 2) covariance in template pixels (none when zero)."""
    import cv2

    if not covariance.any():
        return template
    reach = int(np.ceil(3 * np.sqrt(np.linalg.eigvalsh(covariance).max())))
    offsets = np.stack(np.mgrid[-reach:reach + 1, -reach:reach + 1][::-1], axis=-1).astype(np.float64)
    kernel = np.exp(-0.5 * np.einsum("...i,ij,...j->...", offsets, np.linalg.inv(covariance), offsets))
    return cv2.filter2D(template, -1, (kernel / kernel.sum()).astype(np.float32), borderType=cv2.BORDER_REPLICATE)


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

    triangulated: dict[int, np.ndarray] = {}
    for marker_id, observations in _observations(detections, reconstruction).items():
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


def _observations(detections: dict[str, dict[int, np.ndarray]], reconstruction
                  ) -> dict[int, list[tuple[np.ndarray, object]]]:
    """{marker id: [(corners (4, 2), image)]}: each detection in a frame the model has posed."""
    images = {image.name: image for image in reconstruction.images.values() if image.has_pose}
    views: dict[int, list[tuple[np.ndarray, object]]] = defaultdict(list)
    for name, markers in detections.items():
        if name in images:
            for marker_id, corners in markers.items():
                views[marker_id].append((corners, images[name]))
    return views


def side_lengths(corners3d: np.ndarray) -> np.ndarray:
    """The four side lengths of a (4, 3) quadrilateral, corners in order."""
    return np.linalg.norm(corners3d - np.roll(corners3d, -1, axis=0), axis=1)


def metres_per_unit(detections: dict[str, dict[int, np.ndarray]], markers: dict[int, np.ndarray], reconstruction,
                    marker_size: float) -> float:
    """Metres per model unit: the median, over every view of a triangulated marker, of the marker's
    distance from the camera in metres (its pose from the four corners and the printed size,
    cv2.solvePnP's IPPE_SQUARE) over that distance in model units (to its triangulated centre).

    Per view, not the triangulated square's side: views filmed from nearly one place leave the
    corners' depth to the few views from elsewhere, and one of them off by a pixel set the scale of
    a generated hard cell 0.6 % off (one view of seven, at a slant); the median outvotes it."""
    import cv2

    half = marker_size / 2
    square = np.array([[-half, half, 0.0], [half, half, 0.0], [half, -half, 0.0], [-half, -half, 0.0]])
    ratios = []
    for marker_id, observations in _observations(detections, reconstruction).items():
        if marker_id not in markers:
            continue
        for corners, image in observations:
            normalized = image.camera.cam_from_img(corners + COLMAP_FROM_OPENCV_PIXELS)
            solved, _, metres = cv2.solvePnP(square, normalized, np.eye(3), None, flags=cv2.SOLVEPNP_IPPE_SQUARE)
            units = np.linalg.norm(image.cam_from_world() * markers[marker_id].mean(axis=0))
            if solved and units > 0:
                ratios.append(float(np.linalg.norm(metres)) / units)
    return float(np.median(ratios))
