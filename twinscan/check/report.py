"""The outcome of `twinscan check`: validation errors, unit facts, probes at rest, and one verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal, get_args

from twinscan.check.asset_validation import AssetValidation
from twinscan.check.physics import ProbeRest
from twinscan.check.probes import HeightMap, ProbeSite, Surface
from twinscan.check.validate import UnitsFacts

Outcome = Literal["rested", "hovered", "fell_through", "unsettled"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


@dataclass(frozen=True)
class ProbeResult:
    name: str
    xy: tuple[float, float]  # where it was dropped
    surface: Surface
    surface_z: float  # the height it must rest at (its bottom), from ray casting the colliders
    rest_position: tuple[float, float, float]  # centre of the cube at the end
    rest_bottom_z: float
    rest_error_m: float  # rest_bottom_z - surface_z
    speed_m_s: float
    outcome: Outcome


def classify_rest(site: ProbeSite, rest: ProbeRest, tolerance: float, settled_speed: float) -> ProbeResult:
    """Rested: within `tolerance` of the surface below and still; above it: hovered; below: fell through."""
    error = rest.bottom_z - site.surface_z
    if error < -tolerance:
        outcome: Outcome = "fell_through"
    elif error > tolerance:
        outcome = "hovered"
    else:
        outcome = "rested" if rest.speed <= settled_speed else "unsettled"
    return ProbeResult(site.name, site.xy, site.surface, site.surface_z, rest.position, rest.bottom_z, error,
                       rest.speed, outcome)


@dataclass
class CheckReport:
    usd_path: str
    errors: list[str]  # validation: each says what is wrong -- what to do
    units: UnitsFacts
    counts: dict[str, int]
    probes: list[ProbeResult]
    physics_run: bool
    seconds: float
    probe_size_m: float = 0.2
    physics_note: str = ""  # why physics did not run
    height_map: HeightMap | None = field(default=None, repr=False)  # for the top-down figure
    asset_validation: AssetValidation | None = None  # NVIDIA's Asset Validator; its failures are in `errors`
    asset_validator_note: str = ""  # why it did not run

    @property
    def warnings(self) -> list[str]:
        """What the Asset Validator warns about (each names its rule and prim); not a failed verdict."""
        found = self.asset_validation.warnings if self.asset_validation is not None else []
        return [f"NVIDIA Asset Validator: {issue.line()}" for issue in found]

    @property
    def verdict(self) -> bool:
        """True when the stage validates and every probe came to rest on the surface below it."""
        return not self.errors and all(probe.outcome == "rested" for probe in self.probes)

    @property
    def verdict_line(self) -> str:
        outcomes = {name: [p for p in self.probes if p.outcome == name] for name in OUTCOMES}
        parts = [f"{len(self.errors)} validation error{'s' * (len(self.errors) != 1)}"]
        if self.asset_validation is not None:
            failures, warnings = len(self.asset_validation.failures), len(self.asset_validation.warnings)
            parts.append(f"NVIDIA Asset Validator {failures} failure{'s' * (failures != 1)}, "
                         f"{warnings} warning{'s' * (warnings != 1)}")
        elif self.asset_validator_note:
            parts.append(f"NVIDIA Asset Validator not run ({self.asset_validator_note})")
        if self.physics_run:
            worst = max((abs(p.rest_error_m) for p in outcomes["rested"]), default=0.0)
            parts.append(f"{len(outcomes['rested'])}/{len(self.probes)} probes rested "
                         f"(worst {100 * worst:.1f} cm)")
            parts += [f"{len(found)} {name.replace('_', ' ')} at "
                      + ", ".join(f"({p.xy[0]:.2f}, {p.xy[1]:.2f})" for p in found[:4])
                      for name, found in outcomes.items() if name != "rested" and found]
        else:
            parts.append(f"physics not run ({self.physics_note})" if self.physics_note else "physics not run")
        return f"{'PASS' if self.verdict else 'FAIL'} {self.usd_path}: " + "; ".join(parts) + f" ({self.seconds:.1f} s)"

    def figures(self) -> dict:
        """Plain numbers for the manifest."""
        by_outcome = {name: sum(p.outcome == name for p in self.probes) for name in OUTCOMES}
        rested = [abs(p.rest_error_m) for p in self.probes if p.outcome == "rested"]
        return {"verdict": self.verdict, "validation_errors": len(self.errors), "probes": len(self.probes),
                **{f"probes_{name}": count for name, count in by_outcome.items()},
                "worst_rest_error_m": max(rested, default=0.0), "physics_run": self.physics_run,
                "check_seconds": self.seconds, **self.counts, **self._asset_figures()}

    def _asset_figures(self) -> dict:
        if self.asset_validation is None:
            return {"asset_validator_run": False}
        return {"asset_validator_run": True, "asset_validator_failures": len(self.asset_validation.failures),
                "asset_validator_warnings": len(self.asset_validation.warnings),
                "asset_validator_by_rule": self.asset_validation.by_rule(),
                "asset_validator_disabled": sorted(self.asset_validation.disabled)}

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "verdict_line": self.verdict_line, "errors": self.errors,
                "units": asdict(self.units), "counts": self.counts,
                "probes": [asdict(probe) for probe in self.probes], "probe_size_m": self.probe_size_m,
                "physics_run": self.physics_run,
                "physics_note": self.physics_note, "seconds": self.seconds, "warnings": self.warnings,
                "asset_validation": self.asset_validation.to_dict() if self.asset_validation is not None else None,
                "asset_validator_note": self.asset_validator_note}
