"""The OpenUSD twin: splats, colliders, visual mesh and cameras on a validated Z-up metre stage."""

from twinscan.usd_export.cameras import usd_lens_from_intrinsics
from twinscan.usd_export.content import CameraTrack, ExportOptions, FloorArea, TwinContent, TwinMetadata
from twinscan.usd_export.from_ply import package_from_ply
from twinscan.usd_export.inspection import open_stage, summarize, validation_errors
from twinscan.usd_export.twin import package_usdz, write_twin

__all__ = ["CameraTrack", "ExportOptions", "FloorArea", "TwinContent", "TwinMetadata", "package_from_ply",
           "open_stage", "package_usdz", "summarize", "usd_lens_from_intrinsics", "validation_errors", "write_twin"]
