"""Finished captures as one markdown table (for docs/benchmarks.md): preset, where each stage ran, per-stage
seconds, peak GPU memory, held-out PSNR/SSIM and SfM registration, read from each workspace's manifest.

    python benchmarks/capture_table.py NAME=OUT[:PEAK_MIB] ...

PEAK_MIB is the peak GPU memory sampled while the capture ran (benchmarks/gpu_check.sh samples nvidia-smi);
without it the column says "-". The geometry figures are eval_twin.py's (gpu_check.sh prints them after).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

STAGES = ("frames", "sfm", "splats", "mesh", "usd", "check")


def row(name: str, workspace: Path, peak_mib: str) -> list[str]:
    manifest = json.loads((workspace / "manifest.json").read_text())
    stages = manifest.get("stages", {})
    seconds = [stages.get(stage, {}).get("seconds") for stage in STAGES]
    sfm = stages.get("sfm", {}).get("figures", {})
    splats = stages.get("splats", {}).get("figures", {})
    quality = manifest.get("quality", {}).get("name", "?")
    devices = f"SIFT {sfm.get('sift_device', '?')}, splats {splats.get('device', '?')}"
    return [name, quality, devices,
            *("-" if s is None else f"{s:.0f}" for s in seconds),
            f"{sum(s for s in seconds if s is not None):.0f}",
            peak_mib or "-",
            f"{splats.get('psnr', float('nan')):.2f} / {splats.get('ssim', float('nan')):.3f}",
            f"{sfm.get('registered', '?')}/{sfm.get('total', '?')}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="+", metavar="NAME=OUT[:PEAK_MIB]")
    args = parser.parse_args()
    header = ["capture", "preset", "devices", *(f"{stage} s" for stage in STAGES), "total s", "peak GPU MiB",
              "held-out PSNR dB / SSIM", "registered"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for spec in args.captures:
        name, _, rest = spec.partition("=")
        workspace, _, peak = rest.partition(":")
        print("| " + " | ".join(row(name, Path(workspace), peak)) + " |")


if __name__ == "__main__":
    main()
