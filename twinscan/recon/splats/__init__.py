"""3D Gaussian Splatting: gsplat's training recipe on CUDA, or on twinscan's CPU rasterizer."""

from twinscan.recon.splats.backend import Backend, select_backend
from twinscan.recon.splats.config import SplatsConfig
from twinscan.recon.splats.stage import run_splats
from twinscan.recon.splats.trainer import Evaluation, TrainResult, evaluate, render, train_splats
from twinscan.recon.splats.views import TrainingViews, load_training_views, views_from_reconstruction

__all__ = ["Backend", "Evaluation", "SplatsConfig", "TrainResult", "TrainingViews", "evaluate",
           "load_training_views", "render", "run_splats", "select_backend", "train_splats",
           "views_from_reconstruction"]
