"""`twinscan render`: labelled synthetic views of a finished twin (RGB, depth, normals, masks), randomized."""

from twinscan.render.config import RenderConfig
from twinscan.render.run import render_dataset

__all__ = ["RenderConfig", "render_dataset"]
