"""Figures as people read them (one formatter for the CLI), and progress bars that show every step."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from twinscan.cli.app import app
from twinscan.figures import format_figure, number
from twinscan.workspace import Workspace


@pytest.mark.parametrize(("value", "name", "text"), [
    (19904, "collision_faces", "19,904"),
    (19904.0, "mesh_collision_faces", "19,904"),  # USD metadata gives whole numbers back as floats
    (104710, "", "104,710"),
    (0.0001707, "worst_rest_error_m", "0.171 mm"),
    (0.03369, "voxel_size_m", "3.37 cm"),
    (0.0095, "rms_m", "9.5 mm"),
    (12.7, "extent_m", "12.7 m"),
    (26.658, "psnr", "26.66 dB"),
    (0.8749, "ssim", "0.8749"),
    (0.2925, "mean_reprojection_error_px", "0.2925 px"),
    (0.13, "rotation_deg", "0.13°"),
    (1250.09, "mean_sharpness", "1,250"),
    (1.0, "registered_fraction", "1"),
    (0.5, "", "0.5"),
    (6.417210263000015, "check_seconds", "6.417 s"),
    (1.639, "floor_area_m2", "1.639 m²"),
    (-0.0123, "", "-0.0123"),
    (0.0, "", "0"),
    (True, "verdict", "yes"),
    (None, "lpips", "–"),
    ("incremental", "mapper", "incremental"),
])
def test_figures_read_as_people_read_them(value: object, name: str, text: str) -> None:
    assert format_figure(value, name) == text


def test_no_figure_is_written_with_an_exponent() -> None:
    for value in (1.99e4, 1.2345e-5, 3.3e9, 123456.7, 0.000999):
        assert "e" not in number(value), number(value)
    assert number(1.2345e-5) == "0.00001234" and number(3.3e9) == "3,300,000,000"


def test_the_workspace_summary_prints_formatted_figures(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    with ws.run_stage("splats", {}, {}, {}) as run:
        run.figures.update({"psnr": 26.658, "ssim": 0.8749, "num_gaussians": 104710})
    with ws.run_stage("check", {}, {}, {}) as run:
        run.figures.update({"verdict": True, "collider_triangles": 19916.0, "worst_rest_error_m": 0.0001707})
    result = CliRunner().invoke(app, ["info", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for text in ("psnr=26.66 dB", "ssim=0.8749", "num_gaussians=104,710", "verdict=yes", "collider_triangles=19,916",
                 "worst_rest_error_m=0.171 mm"):
        assert text in result.output, text
    assert "e+0" not in result.output and "0.0001707" not in result.output


def test_a_bar_of_a_few_steps_draws_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    from twinscan import progress

    screen = Console(record=True, force_terminal=True, width=120)
    monkeypatch.setattr(progress, "console", screen)
    with progress.progress_bar("mesh", total=6) as advance:
        for step in range(1, 7):
            advance(1, status=f"step {step} done")
    drawn = screen.export_text()
    for step in range(1, 7):
        assert f"{step}/6" in drawn and f"step {step} done" in drawn
