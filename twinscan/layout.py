"""Every path under a capture workspace OUT/, and the stages' order: the one place they are spelled.

Paths are relative to OUT/ (posix). A stage that writes a folder atomically writes its files under a
temporary folder first: `inside(FOLDER, PATH)` is PATH's name within FOLDER. CONVENTIONS.md lists
what each file holds.
"""

from __future__ import annotations

from pathlib import PurePosixPath

STAGES = ("frames", "sfm", "splats", "mesh", "usd", "check")  # the order `capture` runs them in

MANIFEST = "manifest.json"  # the stage records (workspace.py)
LOCK = ".twinscan.lock"  # exists only while a run holds the workspace

# frames
FRAMES_DIR = "frames"  # the kept frames, *.jpg, names sorting in capture order
FRAMES_JSON = "frames.json"  # [{file, source_index, time_s, sharpness, motion}], `file` relative to OUT/

# sfm
SFM_DIR = "sfm"  # the aligned COLMAP model (binary), twin frame
SFM_RECORD = "sfm/world.json"  # the stage's typed record (recon/sfm/record.py): world frame, scale, floor
SFM_PARTIAL = "sfm.incomplete"  # a run that registered too few frames leaves its model here
UNDISTORTED = "sfm/undistorted"  # training images/ + sparse/ (PINHOLE cameras), twin frame
UNDISTORTED_IMAGES = "sfm/undistorted/images"
UNDISTORTED_CAMERAS = "sfm/undistorted/sparse"
TRANSFORMS = "transforms.json"  # nerfstudio poses (OpenGL camera axes)
SFM_WORK_PREFIX = ".sfm-work.tmp-"  # scratch folders (matching database), removed after the stage

# splats
SPLATS_DIR = "splats"
SPLATS_PLY = "splats/splats.ply"  # the cell: the splats inside the captured region
BACKGROUND_PLY = "splats/background.ply"  # the splats outside it, when there are any
SPLATS_RECORD = "splats/splats.json"  # the stage's typed record (recon/splats/record.py): held-out views, counts
HELDOUT_DIR = "splats/heldout"  # per held-out view, the render beside its picture (PNG)
SPLATS_CHECKPOINT = ".splats-checkpoint.pt"  # training's checkpoint while it runs (resume)

# mesh
MESH_DIR = "mesh"
VISUAL_GLB = "mesh/visual.glb"  # textured when an atlas was baked, else vertex colours
VISUAL_OBJ = "mesh/visual.obj"  # + VISUAL_MTL and the atlas PNG
VISUAL_MTL = "mesh/visual.mtl"
VISUAL_COLOURS = "mesh/visual_colours.ply"  # vertex colours (glTF would multiply them into the texture)
COLLISION = "mesh/collision.obj"  # the structure, floor excluded
COLLISION_CONFIDENCE = "mesh/collision_confidence.npy"  # (F,) float32 per face of COLLISION, in its order
PLANES = "mesh/planes.obj"  # planar collider patches closed where fusion left fragments (meshing/planes.py)
FLOOR = "mesh/floor.obj"  # the floor slab collider, top face at z = 0
CONVEX_DIR = "mesh/convex"  # part_000.obj ... (CoACD)
CONVEX_PART = "part_{:03d}.obj"  # a convex part's name inside CONVEX_DIR
MESH_SUMMARY = "mesh/mesh.json"  # the stage's typed record (meshing/record.py): files, floor, figures, warnings

# usd
TWIN = "twin.usda"  # the root layer (+ .usdc layers beside it, TWIN_USDZ with --usdz)

# check
CHECK_DIR = "check"
PROBES_JSON = "check/probes.json"  # each probe's drop site, outcome and rest position (the viewer's)
PROBES_PNG = "check/probes.png"

# report
REPORT = "report.html"

# batch: a ROOT holding one workspace per capture
BATCH_JSON = "batch.json"


def inside(folder: str, path: str) -> str:
    """`path` (relative to OUT/) as a name inside `folder`: where a stage writes it in its temporary folder."""
    return PurePosixPath(path).relative_to(folder).as_posix()
