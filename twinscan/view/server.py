"""The viser side of `twinscan view`: the loaded twin as scene nodes, the layer toggles, the click readout.

All geometry comes from `TwinView` (the pure core); this module only hands it to viser.
"""

from __future__ import annotations

import contextlib
import io
import threading
from typing import Any, Callable

import numpy as np

from twinscan.errors import TwinscanError
from twinscan.view.layout import Layout, layout
from twinscan.view.meshes import FLOOR_RGB
from twinscan.view.pick import ColliderQueries, pick
from twinscan.view.ports import ensure_port_free
from twinscan.view.probes import Probes, load_probes
from twinscan.view.twin import TwinView, describe

COLLIDER_OPACITY = 0.35
FLOOR_OPACITY = 0.25
PROBE_RGB = {"rested": (60, 200, 90), "planned": (80, 150, 255)}
PROBE_BAD_RGB = (230, 40, 40)
READY = "Click a point in the scene to read its coordinates."  # the last panel text: everything is sent


def splat_budgets(shown: int) -> list[int]:
    """The choices of how many splats to draw: powers-of-two fractions of `shown` down to ~25k, and all."""
    budgets, count = [shown], shown // 2
    while count >= 25_000:
        budgets.append(count)
        count //= 2
    return budgets[::-1]


def _wxyz(rotation: np.ndarray) -> np.ndarray:
    import viser.transforms as vtf

    return vtf.SO3.from_matrix(rotation).wxyz


def _marker_image(dictionary: str, marker_id: int) -> np.ndarray:
    import cv2

    from twinscan.recon.sfm.config import aruco_dictionary_id

    cells = cv2.aruco.generateImageMarker(cv2.aruco.getPredefinedDictionary(aruco_dictionary_id(dictionary)),
                                          marker_id, 120, borderBits=1)
    return np.repeat(cells[..., None], 3, axis=2)


class TwinViewer:
    """A running viewer. `stop()` ends it; `layers` maps each toggle's name to its scene handles."""

    def __init__(self, view: TwinView, host: str = "127.0.0.1", port: int = 8080,
                 on_probes: Callable[[Probes], None] | None = None) -> None:
        import viser

        ensure_port_free(host, port)
        self.view = view
        self.layout: Layout = layout(view)
        with contextlib.redirect_stdout(io.StringIO()):  # viser prints its own panel; the CLI prints the URL
            self.server = viser.ViserServer(host=host, port=port, label="twinscan view", verbose=False)
        if port and self.server.get_port() != port:  # taken between our probe and viser's bind
            self.server.stop()
            raise TwinscanError(f"port {port} on {host} is in use",
                                "pass another --port, or stop what listens there")
        self.host, self.port = host, self.server.get_port()
        self.layers: dict[str, list[Any]] = {}
        self._colliders: ColliderQueries | None = None
        self._on_probes = on_probes
        self._build_scene()
        self._build_panel()
        threading.Thread(target=self._late_layers, name="twinscan-view-probes", daemon=True).start()

    # ---- scene --------------------------------------------------------------------------------------------
    def _add(self, layer: str, handle: Any) -> Any:
        self.layers.setdefault(layer, []).append(handle)
        return handle

    def _build_scene(self) -> None:
        scene, view, lay = self.server.scene, self.view, self.layout
        scene.set_up_direction("+z")
        # no shadows: every shadow-casting light re-renders the scene each frame, which a software-rendered
        # browser (a headless server, a VM) cannot afford; the twin's geometry reads fine without them
        scene.configure_default_lights(enabled=True, cast_shadow=False)
        # nor an environment map: the browser keeps the canvas hidden until its PMREM is built, which takes
        # a software renderer tens of seconds; the default lights shade the meshes well enough
        scene.configure_environment_map(hdri=None)
        scene.add_light_hemisphere("/sky_light", sky_color=(255, 255, 255), ground_color=(120, 120, 130),
                                   intensity=1.2, position=(0.0, 0.0, 1.0))  # from above: Z is up
        position, look_at = lay.start_camera()
        self.server.initial_camera.position = tuple(position)
        self.server.initial_camera.look_at = tuple(look_at)
        self.server.initial_camera.up = (0.0, 0.0, 1.0)
        width, height, grid_centre = lay.grid_size
        self._add("grid", scene.add_grid("/grid", width, height, plane="xy", cell_size=1.0, section_size=1.0,
                                         cell_color=(120, 120, 120), section_color=(90, 90, 90),
                                         position=grid_centre + [0, 0, 0.002], shadow_opacity=0.0))
        self._add("grid", scene.add_frame("/grid/origin", axes_length=0.4, axes_radius=0.012))
        bar = lay.scale_bar(1.0)
        self._add("grid", scene.add_line_segments("/grid/scale_bar", bar, (30, 30, 30), thickness=0.025))
        unit = "1 m" if view.metric else "1 unit (scale arbitrary)"
        self._add("grid", scene.add_label("/grid/scale_label", unit, position=bar[0].mean(axis=0) + [0, -0.1, 0.02],
                                                 anchor="top-center"))

        self._send_splats(view.splats.shown, visible=True)
        if view.visual_glb is not None:
            self._add("visual mesh", scene.add_glb("/visual_mesh", view.visual_glb, visible=False))
        for index, part in enumerate(view.collider_parts):
            self._add("colliders", scene.add_mesh_simple(
                f"/colliders/part_{index}", part.mesh.vertices, part.mesh.faces, color=part.rgb,
                opacity=COLLIDER_OPACITY, side="double", flat_shading=True, cast_shadow=False,
                receive_shadow=False))
        if view.floor is not None:
            self._add("floor slab", scene.add_mesh_simple("/floor_slab", view.floor.vertices, view.floor.faces,
                                                          color=FLOOR_RGB, opacity=FLOOR_OPACITY, side="double",
                                                          cast_shadow=False, receive_shadow=False))
        frustum = max(0.05, 0.03 * lay.radius)
        for camera in view.cameras:
            self._add("cameras", scene.add_camera_frustum(
                f"/cameras/{camera.name}", fov=camera.fov_y, aspect=camera.aspect, scale=frustum,
                thickness=frustum * 0.04, color=(240, 200, 40), image=camera.thumbnail, format="jpeg",
                wxyz=_wxyz(camera.world_from_cam[:3, :3]), position=camera.world_from_cam[:3, 3],
                cast_shadow=False, receive_shadow=False))
        if view.marker is not None:
            marker = view.marker
            self._add("marker", scene.add_image("/marker", _marker_image(marker.dictionary, marker.marker_id),
                                                marker.size_m, marker.size_m, format="png", cast_shadow=False,
                                                receive_shadow=False,
                                                position=(0.0, 0.0, marker.centre_z_m + 0.003)))
            self._add("marker", scene.add_label("/marker/label", marker.label, anchor="bottom-center",
                                                position=(0.0, 0.6 * marker.size_m, 0.05 + marker.centre_z_m)))

    def _send_splats(self, count: int, visible: bool) -> None:
        """(Re)send the `count` most opaque splats; a browser that renders in software wants fewer."""
        splats = self.view.splats.prefix(count)
        handle = self.server.scene.add_gaussian_splats("/splats", splats.centers, splats.covariances, splats.rgbs,
                                                       splats.opacities, visible=visible)
        self.layers["splats"] = [handle]

    def _late_layers(self) -> None:
        """Slow to compute, not needed to see the twin: collider queries for clicks, then the probes."""
        try:
            self._colliders = ColliderQueries(self.view.collider_meshes)
            probes = load_probes(self.view.root, self.view.manifest, self.view.collider_meshes)
        except Exception as error:  # noqa: BLE001 -- the view stays up; say what is missing
            self._probe_text.content = f"probes not shown: {error}"
            return
        for probe in probes.probes:
            colour = PROBE_RGB.get(probe.outcome, PROBE_BAD_RGB)
            self._add("probes", self.server.scene.add_box(
                f"/probes/{probe.name}", color=colour, dimensions=(probes.size_m,) * 3, opacity=0.8,
                position=probe.centre, visible=self._toggles["probes"].value, cast_shadow=False,
                receive_shadow=False))
        self._probe_text.content = f"**Probes** ({len(probes.probes)}): {probes.summary}"
        if self._on_probes is not None:
            self._on_probes(probes)

    # ---- panel --------------------------------------------------------------------------------------------
    def _build_panel(self) -> None:
        gui, view = self.server.gui, self.view
        counts = describe(view)
        lines = [f"**{view.root.name}**: {counts['splats_total']:,} splats, "
                 f"{counts['collider_faces']:,} collider faces, {counts['cameras']} cameras",
                 f"Twin frame: Z up, {'metres' if view.metric else 'arbitrary units'}; origin: {view.origin}; "
                 f"grid cells 1 {'m' if view.metric else 'unit'}",
                 ]
        if view.colliders is not None:
            lines.append("Colliders: " + ("coloured by confidence (red: low, green: high)" if view.confidence_coloured
                                          else "one colour (the mesh stage records no per-face confidence)"))
        lines += [f"Notice: {notice}" for notice in view.notices()]
        gui.add_markdown("  \n".join(lines))
        self._toggles: dict[str, Any] = {}
        defaults = {"splats": True, "visual mesh": False, "colliders": True, "floor slab": True, "cameras": True,
                    "marker": True, "probes": True, "grid": True}
        with gui.add_folder("Layers"):
            for name, initial in defaults.items():
                if name not in self.layers and name != "probes":
                    continue
                toggle = gui.add_checkbox(name.capitalize(), initial)
                toggle.on_update(lambda _event, name=name, toggle=toggle: self.show(name, toggle.value))
                self._toggles[name] = toggle
            budgets = splat_budgets(view.splats.shown)
            if len(budgets) > 1:
                budget = gui.add_dropdown("Splats shown", [f"{count:,}" for count in budgets],
                                          initial_value=f"{view.splats.shown:,}",
                                          hint="the most opaque first; fewer draw faster in a slow browser")
                budget.on_update(lambda _event: self._send_splats(int(budget.value.replace(",", "")),
                                                                  self._toggles["splats"].value))
        for name, toggle in self._toggles.items():
            self.show(name, toggle.value)
        self._probe_text = gui.add_markdown("**Probes**: planning where `twinscan check` drops them...")
        self._readout = gui.add_markdown(READY)
        self.server.scene.on_click()(self._clicked)

    def show(self, layer: str, visible: bool) -> None:
        for handle in self.layers.get(layer, []):
            handle.visible = visible

    def _clicked(self, event: Any) -> None:
        splats = self.view.splats
        result = pick(event.ray_origin, event.ray_direction, splats.centers, splats.opacities, self._colliders)
        if result is None:
            self._readout.content = "Nothing under the cursor (sky)."
            return
        if self._colliders is None:
            self._readout.content = result.line() + " (collider distances still loading)"
        else:
            self._readout.content = result.line()
        size = max(0.01, 0.006 * self.layout.radius)
        self.server.scene.add_icosphere("/pick", radius=size, color=(255, 30, 200), position=result.point)
        self.server.scene.add_label("/pick/label", result.line(), position=(0.0, 0.0, 2 * size))

    def stop(self) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            self.server.stop()
