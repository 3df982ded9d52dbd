"""`twinscan view`: the twin in a browser (viser): splats, meshes, colliders, cameras, probes, Z up, metres.

A pure core loads what a workspace holds into numpy arrays (`load_twin`); `serve` hands them to viser.
"""

from twinscan.view.twin import TwinView, load_twin

__all__ = ["TwinView", "load_twin"]
