"""Raw SfM with pycolmap, in-process: SIFT, matching suited to video, global or incremental mapping.

Video frames come in order, so matching each frame with its next `overlap` frames finds nearly all
overlapping pairs at linear cost. A walk that comes back to its start also needs pairs far apart in
time; COLMAP finds those with a vocabulary tree, which cannot be downloaded here, so instead a
sparse set of keyframes spread over the video is matched all-to-all (quadratic in keyframes only).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from twinscan.recon.sfm.config import SfmConfig

FEATURE_BYTES = 152  # a SIFT keypoint (6 float32) and its descriptor (128 uint8) in COLMAP's database
MATCH_BYTES = 16  # a match (two uint32), stored raw and again once verified
MATCHED_FRACTION = 0.25  # of a pair's features that match: generous for overlapping video frames


def loop_pairs(num_images: int, keyframes: int, overlap: int) -> list[tuple[int, int]]:
    """Index pairs among ~`keyframes` evenly spread frames that sequential matching does not cover."""
    picked = np.unique(np.linspace(0, num_images - 1, min(keyframes, num_images)).round().astype(int))
    return [(int(a), int(b)) for i, a in enumerate(picked) for b in picked[i + 1:] if b - a > overlap]


def disk_needed(num_images: int, image_bytes: int, cfg: SfmConfig) -> int:
    """Bytes the sfm stage writes, about: COLMAP's database (features, matches) and the model with
    its undistorted images (the frames' size, twice). pycolmap aborts the process on a full disk
    rather than raising, so the stage checks this much is free before it starts."""
    if cfg.matching == "exhaustive":
        pairs = num_images * (num_images - 1) // 2
    else:  # sequential with quadratic overlap: about twice `overlap` pairs a frame
        pairs = 2 * cfg.overlap * num_images + len(loop_pairs(num_images, cfg.loop_keyframes, cfg.overlap))
    per_image = cfg.for_frames(cfg.max_side).max_features  # frames are at most max_side: an upper bound
    features = num_images * per_image * FEATURE_BYTES
    matches = round(pairs * per_image * MATCHED_FRACTION) * MATCH_BYTES
    return features + matches + 2 * image_bytes


def longest_side(image_dir: Path, names: list[str]) -> int:
    """The longest side, pixels, of the largest of these images (headers only)."""
    from PIL import Image

    def side(name: str) -> int:
        with Image.open(image_dir / name) as image:
            return max(image.size)

    return max(side(name) for name in names)


def extract_features(database: Path, image_dir: Path, names: list[str], cfg: SfmConfig, camera=None) -> None:
    """SIFT into `database`, one shared OPENCV camera: `camera` (a pycolmap.Camera) when the
    intrinsics are known, else a focal prior from EXIF or `cfg.focal_factor`.

    COLMAP numbers images in the order its extraction threads finish, which changes from run to run
    on a loaded machine, and the mapper's choices follow those numbers: the same frames registered
    28 of 34 in one run and 34 of 34 in the next. The features are extracted on every core into a
    scratch database and copied into `database` numbered in name order (`_copy_in_name_order`).
    """
    import pycolmap

    if cfg.max_features is None:  # left to the images' size (the sfm stage has chosen them already)
        cfg = cfg.for_frames(longest_side(image_dir, names))
    reader = pycolmap.ImageReaderOptions()
    reader.camera_model = "OPENCV" if camera is None else camera.model_name
    reader.default_focal_length_factor = cfg.focal_factor
    if camera is not None:
        reader.camera_params = camera.params_to_string()
    extraction = pycolmap.FeatureExtractionOptions()
    extraction.max_image_size = cfg.max_side
    extraction.sift.max_num_features = cfg.max_features
    scratch = database.with_name(f"{database.stem}.unordered.db")
    scratch.unlink(missing_ok=True)
    pycolmap.extract_features(scratch, image_dir, image_names=names, camera_mode=pycolmap.CameraMode.SINGLE,
                              reader_options=reader, extraction_options=extraction, device=_device(cfg))
    database.unlink(missing_ok=True)
    _copy_in_name_order(scratch, database)
    scratch.unlink()


def _copy_in_name_order(source_path: Path, target_path: Path) -> None:
    """The cameras, rigs, images and features of COLMAP database `source_path` into a new one, image
    and frame ids 1, 2, ... in name order (one image a frame, as single-camera extraction writes)."""
    import pycolmap

    with pycolmap.Database.open(source_path) as source, pycolmap.Database.open(target_path) as target:
        for camera in source.read_all_cameras():
            target.write_camera(camera, use_camera_id=True)
        for rig in source.read_all_rigs():
            target.write_rig(rig, use_rig_id=True)
        frame_of = {data.id: frame for frame in source.read_all_frames() for data in frame.image_ids}
        for new_id, image in enumerate(sorted(source.read_all_images(), key=lambda image: image.name), start=1):
            copy = pycolmap.Image(name=image.name, camera_id=image.camera_id, image_id=new_id)
            copy.frame_id = new_id
            frame = pycolmap.Frame(frame_id=new_id, rig_id=frame_of[image.image_id].rig_id)
            frame.add_data_id(copy.data_id)
            target.write_frame(frame, use_frame_id=True)  # before its image: COLMAP checks the image's frame
            target.write_image(copy, use_image_id=True)
            target.write_keypoints(new_id, source.read_keypoints(image.image_id))
            target.write_descriptors(new_id, source.read_descriptors(image.image_id))


def match_features(database: Path, names: list[str], cfg: SfmConfig, work: Path) -> None:
    """Exhaustive, or sequential in name order plus all-to-all loop keyframes (`loop_pairs`).

    Each pair's geometric verification (RANSAC) is seeded with `cfg.seed`: unseeded, a worker thread's
    random state depends on which pairs it verified before, so the verified matches changed run to run.
    CPU matching runs on one thread: with several, about one run in 50 on a loaded machine lost most
    of one image's matches with its neighbours (238 -> 24 for one pair), a race in COLMAP's threaded
    CPU matcher; one thread costs 1.3x the matching time (40 s against 32 s on the sample's 180 frames).
    On the GPU one matcher runs on GPU 0 (COLMAP starts one per listed GPU): one matcher, as on the CPU.
    """
    import pycolmap

    matching = pycolmap.FeatureMatchingOptions()
    if cfg.device.name == "cuda":
        matching.gpu_index = "0"
    else:
        matching.num_threads = 1
    verification = pycolmap.TwoViewGeometryOptions()
    verification.ransac.random_seed = cfg.seed
    common = dict(matching_options=matching, verification_options=verification, device=_device(cfg))
    if cfg.matching == "exhaustive":
        pycolmap.match_exhaustive(database, **common)
        return
    sequential = pycolmap.SequentialPairingOptions()
    sequential.overlap = cfg.overlap
    sequential.quadratic_overlap = True
    pycolmap.match_sequential(database, pairing_options=sequential, **common)
    pairs = loop_pairs(len(names), cfg.loop_keyframes, cfg.overlap)
    if pairs:
        ordered = sorted(names)  # COLMAP's sequential order is by name; frame names sort in time
        pairs_file = work / "loop_pairs.txt"
        pairs_file.write_text("".join(f"{ordered[a]} {ordered[b]}\n" for a, b in pairs))
        imported = pycolmap.ImportedPairingOptions()
        imported.match_list_path = str(pairs_file)
        pycolmap.match_image_pairs(database, pairing_options=imported, **common)


def _device(cfg: SfmConfig):
    """pycolmap's device, always explicit: its default (`auto`) means the GPU on any CUDA build."""
    import pycolmap

    return pycolmap.Device.cuda if cfg.device.name == "cuda" else pycolmap.Device.cpu


def map_features(database: Path, image_dir: Path, work: Path, cfg: SfmConfig) -> dict:
    """{index: pycolmap.Reconstruction} from the matched database, global or incremental."""
    import pycolmap

    models = work / "models"
    models.mkdir(exist_ok=True)
    if cfg.mapper == "incremental":
        options = pycolmap.IncrementalPipelineOptions()
        options.mapper.abs_pose_min_num_inliers = cfg.min_pose_inliers
    else:
        options = pycolmap.GlobalPipelineOptions()
    options.random_seed = cfg.seed
    if cfg.device.name != "cuda":
        # one thread: with the default (every core) three processes mapping the same verified matches side by
        # side on a loaded 2-core machine gave one model whose poses differed in the last bits (CI,
        # 2026-12-04): thread scheduling reaches the mapper's sums
        options.num_threads = 1
    run = pycolmap.incremental_mapping if cfg.mapper == "incremental" else pycolmap.global_mapping
    return run(database, image_dir, models, options=options)


def reconstruct(image_dir: Path, names: list[str], work: Path, cfg: SfmConfig,
                advance: Callable[..., None] = lambda n=1, status=None: None):
    """The largest model pycolmap finds for these images (None when it finds none).

    `work` receives the database and the raw models; `advance` reports three steps.
    """
    import pycolmap

    pycolmap.logging.minloglevel = pycolmap.logging.ERROR  # COLMAP's INFO lines would bury the progress bars
    pycolmap.set_random_seed(cfg.seed)
    database = work / "database.db"
    extract_features(database, image_dir, names, cfg)
    advance(1, status="features extracted")
    match_features(database, names, cfg, work)
    advance(1, status="matched")
    models = map_features(database, image_dir, work, cfg)
    advance(1, status=f"{cfg.mapper} mapping done")
    if not models:
        return None
    return max(models.values(), key=lambda model: model.num_reg_images())


def model_figures(model, total: int) -> dict[str, float | int]:
    """Registration and accuracy figures recorded in the manifest."""
    camera = next(iter(model.cameras.values()))
    return {
        "registered": model.num_reg_images(),
        "total": total,
        "registered_fraction": round(model.num_reg_images() / total, 4),
        "points3d": model.num_points3D(),
        "mean_reprojection_error_px": round(model.compute_mean_reprojection_error(), 4),
        "mean_track_length": round(model.compute_mean_track_length(), 3),
        "focal_px": round(float(camera.mean_focal_length()), 2),
    }


def triangulate_known_poses(model, image_dir: Path, work: Path, cfg: SfmConfig):
    """`model` (one shared camera, posed images, no points) with 3D points, poses and intrinsics fixed.

    Imported poses (transforms.json, a COLMAP model without points) come without the sparse points
    that the splats stage starts from: features are extracted and matched as `reconstruct` does, and
    COLMAP's point triangulator (`pycolmap.triangulate_points`) adds the points.
    """
    import pycolmap

    pycolmap.logging.minloglevel = pycolmap.logging.ERROR
    database = work / "database.db"
    names = sorted(image.name for image in model.images.values())
    (camera,) = model.cameras.values()
    extract_features(database, image_dir, names, cfg, camera=camera)
    match_features(database, names, cfg, work)
    return pycolmap.triangulate_points(_with_database_ids(model, database), database, image_dir,
                                       work / "triangulated", refine_intrinsics=False)


def _with_database_ids(model, database: Path):
    """`model`'s camera and poses under the database's camera, rig, frame and image ids, which the
    triangulator looks its matches up by."""
    import pycolmap

    cam_from_world = {image.name: image.cam_from_world() for image in model.images.values() if image.has_pose}
    (camera,) = model.cameras.values()
    posed = pycolmap.Reconstruction()
    with pycolmap.Database.open(database) as opened:
        (database_camera,) = opened.read_all_cameras()
        posed.add_camera(pycolmap.Camera(model=camera.model_name, width=camera.width, height=camera.height,
                                         params=camera.params, camera_id=database_camera.camera_id))
        for rig in opened.read_all_rigs():
            posed.add_rig(rig)
        images = {image.image_id: image for image in opened.read_all_images()}
        for frame in opened.read_all_frames():
            (image_data,) = frame.image_ids
            frame.rig_from_world = cam_from_world[images[image_data.id].name]  # one camera: rig = camera
            posed.add_frame(frame)
            posed.register_frame(frame.frame_id)
        for image in images.values():
            posed.add_image(image)
    return posed
