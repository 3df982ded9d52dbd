"""Drop cube probes on the twin in NVIDIA Newton: probes live in the session layer, the files stay as they are.

Newton's own USD importer reads the composed stage (our colliders and the session-layer probes), so the
physics runs on exactly what Isaac Sim or any UsdPhysics consumer would see.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics
from scipy.spatial.transform import Rotation

from twinscan.check.config import CheckConfig
from twinscan.check.probes import ProbeSite
from twinscan.errors import TwinscanError
from twinscan.optional import newton

PROBES_PRIM = "TwinscanProbes"
SCENE_PRIM = "TwinscanPhysicsScene"


@dataclass(frozen=True)
class ProbeRest:
    """A probe's state at the end of the simulation, world frame, metres."""

    position: tuple[float, float, float]  # centre of the cube
    bottom_z: float  # lowest corner, whatever the cube's orientation
    speed: float  # linear, m/s


def newton_available() -> bool:
    try:
        newton()
    except TwinscanError:
        return False
    return True


def drop_probes(stage: Usd.Stage, sites: list[ProbeSite], config: CheckConfig) -> list[ProbeRest]:
    """Author the probes in `stage`'s session layer, simulate them with XPBD, and return where they end up."""
    newton_module = newton()
    _configure_warp(config)
    root = stage.GetDefaultPrim().GetPath()
    with Usd.EditContext(stage, stage.GetSessionLayer()):
        paths = _author_probes(stage, root.AppendChild(PROBES_PRIM), sites, config)
        if not any(prim.IsA(UsdPhysics.Scene) for prim in stage.Traverse()):
            scene = UsdPhysics.Scene.Define(stage, root.AppendChild(SCENE_PRIM))
            scene.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
            scene.CreateGravityMagnitudeAttr(9.81)
    try:
        builder = newton_module.ModelBuilder()
        imported = builder.add_usd(stage, load_visual_shapes=False, load_sites=False)
        model = builder.finalize(device=config.device)
        body_q, body_qd = _simulate(newton_module, model, config)
    finally:
        _remove_from_session(stage, root)
    rests = []
    for path in paths:
        body = imported["path_body_map"][path]
        centre, quaternion_xyzw = body_q[body, :3], body_q[body, 3:]
        rotation = Rotation.from_quat(quaternion_xyzw).as_matrix()
        bottom = centre[2] - 0.5 * config.probe_size_m * np.abs(rotation[2]).sum()
        speed = float(np.linalg.norm(body_qd[body, :3]))
        rests.append(ProbeRest(tuple(float(v) for v in centre), float(bottom), speed))
    return rests


def _author_probes(stage: Usd.Stage, parent: Sdf.Path, sites: list[ProbeSite], config: CheckConfig) -> list[str]:
    UsdGeom.Scope.Define(stage, parent)
    paths = []
    for site in sites:
        cube = UsdGeom.Cube.Define(stage, parent.AppendChild(site.name))
        cube.CreateSizeAttr(config.probe_size_m)
        release_z = site.surface_z + config.drop_height_m + config.probe_size_m / 2
        cube.AddTranslateOp().Set(Gf.Vec3d(site.xy[0], site.xy[1], release_z))
        UsdPhysics.RigidBodyAPI.Apply(cube.GetPrim())
        UsdPhysics.CollisionAPI.Apply(cube.GetPrim())
        paths.append(str(cube.GetPath()))
    return paths


def _remove_from_session(stage: Usd.Stage, root: Sdf.Path) -> None:
    with Usd.EditContext(stage, stage.GetSessionLayer()):
        for name in (PROBES_PRIM, SCENE_PRIM):
            stage.RemovePrim(root.AppendChild(name))


def _configure_warp(config: CheckConfig) -> None:
    import warp

    warp.config.log_level = warp.LOG_WARNING  # no per-kernel "took N ms" lines
    if config.kernel_cache_dir is not None:
        warp.config.kernel_cache_dir = str(config.kernel_cache_dir)
    warp.init()


def _simulate(newton_module: ModuleType, model, config: CheckConfig) -> tuple[np.ndarray, np.ndarray]:
    solver = newton_module.solvers.SolverXPBD(model, iterations=config.solver_iterations)
    pipeline = newton_module.CollisionPipeline(model)
    contacts = pipeline.contacts()
    state, next_state, control = model.state(), model.state(), model.control()
    for _ in range(int(round(config.sim_seconds / config.sim_dt_s))):
        state.clear_forces()
        pipeline.collide(state, contacts)
        solver.step(state, next_state, control, contacts, config.sim_dt_s)
        state, next_state = next_state, state
    return state.body_q.numpy(), state.body_qd.numpy()
