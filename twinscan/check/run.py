"""`twinscan check twin.usda`: static validation, then probes dropped in NVIDIA Newton."""

from __future__ import annotations

import time
from pathlib import Path

from twinscan.check.asset_validation import INSTALL_HINT, asset_validator_available, validate_asset
from twinscan.check.config import CheckConfig
from twinscan.check.physics import drop_probes
from twinscan.check.probes import floor_extent, height_map, plan_probe_sites
from twinscan.check.report import CheckReport, classify_rest
from twinscan.check.validate import validate_stage
from twinscan.optional import newton
from twinscan.usd_export import open_stage


def check_twin(usd_path: str | Path, config: CheckConfig = CheckConfig()) -> CheckReport:
    """Validate the twin and, when its units are sound, prove its colliders hold probes up.

    The stage is opened read-only in spirit: probes go to the session layer and nothing is saved.
    Physics is skipped when the units are wrong (it would simulate a nonsense scale) or nothing collides.
    """
    started = time.perf_counter()
    if config.physics:
        newton()  # fail before any work when the `physics` extra is missing
    stage = open_stage(usd_path)
    validation = validate_stage(stage, usd_path)
    report = CheckReport(str(usd_path), validation.errors, validation.units, validation.counts, [], False, 0.0,
                         config.probe_size_m)
    if not config.asset_validator:
        report.asset_validator_note = "not asked for"
    elif not asset_validator_available():
        report.asset_validator_note = f"not installed: {INSTALL_HINT}"
    else:
        report.asset_validation = validate_asset(usd_path)
        report.errors += [f"NVIDIA Asset Validator: {issue.line()}" for issue in report.asset_validation.failures]
    mesh = validation.collision_mesh()
    if mesh is not None and len(mesh.faces):
        floor = floor_extent(mesh, tolerance=config.rest_tolerance_m)
        area = floor if floor is not None else validation.collider_bounds[:, :2]
        report.height_map = height_map(mesh, area, config.height_map_cell_m)
    units_sound = validation.units.meters_per_unit == 1.0 and validation.units.up_axis == "Z"
    if not config.physics:
        report.physics_note = "not asked for"
    elif not (units_sound and validation.units.default_prim):
        report.physics_note = "skipped: fix the units and defaultPrim first"
    elif report.height_map is None:
        report.physics_note = "skipped: nothing collides"
    else:
        sites = plan_probe_sites(report.height_map, config.probe_size_m, config.probe_spacing_m, config.max_probes,
                                 floor_tolerance=config.rest_tolerance_m)
        rests = drop_probes(stage, sites, config)
        report.probes = [classify_rest(site, rest, config.rest_tolerance_m, config.settled_speed_m_s)
                         for site, rest in zip(sites, rests)]
        report.physics_run = True
    report.seconds = time.perf_counter() - started
    return report
