"""NVIDIA's Asset Validator (`omniverse-asset-validator`, the `physics` extra) on a twin: offline, CPU only.

It runs the rules Omniverse and Isaac Sim apply (materials, normals, manifold meshes, primvars, units,
USDZ packaging, Gaussian splats) next to OpenUSD's own UsdValidation. Every issue comes back as one
line naming its rule and prim; failures and errors fail `twinscan check`, warnings are reported.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

from twinscan.errors import TwinscanError
from twinscan.usd_export.inspection import existing_twin

INSTALL_HINT = 'pip install "twinscan[physics]" (it brings omniverse-asset-validator)'

# Rules that are not run, each with why it is wrong for a twin. None is today: every default rule, and
# the Gaussian splat rule that the validator leaves off by default, passes on twinscan's twins.
DISABLED_RULES: dict[str, str] = {}

# Off by default in 1.18 (registered with skip=True); a twin's splats are exactly what it checks.
EXTRA_RULES = ("GaussianSplatSchemaChecker",)

FAILING = ("failure", "error")


@dataclass(frozen=True)
class AssetIssue:
    severity: str  # failure | error | warning | info
    rule: str
    prim: str  # the prim (or property) the issue is at, "" for the stage or a layer
    message: str

    def line(self) -> str:
        where = f" at {self.prim}" if self.prim else ""
        return f"{self.rule} ({self.severity}){where}: {self.message}"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class AssetValidation:
    issues: tuple[AssetIssue, ...]
    rules_run: tuple[str, ...]
    disabled: dict[str, str]
    version: str

    @property
    def failures(self) -> list[AssetIssue]:
        return [issue for issue in self.issues if issue.severity in FAILING]

    @property
    def warnings(self) -> list[AssetIssue]:
        return [issue for issue in self.issues if issue.severity == "warning"]

    def by_rule(self) -> dict[str, dict[str, int]]:
        """{rule: {severity: count}} for the manifest and the report."""
        counts: dict[str, dict[str, int]] = {}
        for issue in self.issues:
            counts.setdefault(issue.rule, {}).setdefault(issue.severity, 0)
            counts[issue.rule][issue.severity] += 1
        return counts

    def to_dict(self) -> dict:
        return {"version": self.version, "failures": len(self.failures), "warnings": len(self.warnings),
                "by_rule": self.by_rule(), "issues": [issue.to_dict() for issue in self.issues],
                "rules_run": list(self.rules_run), "disabled": dict(self.disabled)}


@functools.cache
def asset_validator() -> ModuleType:
    """Import omni.asset_validator quietly (it logs its plugin start-up at INFO)."""
    logging.getLogger("omni.asset_validator").setLevel(logging.WARNING)
    try:
        import omni.asset_validator as module
    except ImportError as error:
        raise TwinscanError(f"NVIDIA's Asset Validator cannot be imported ({error})", INSTALL_HINT) from error
    return module


def asset_validator_available() -> bool:
    try:
        asset_validator()
    except TwinscanError:
        return False
    return True


def validate_asset(usd_path: str | Path, disabled: dict[str, str] | None = None) -> AssetValidation:
    """Run the validator's default rules (plus EXTRA_RULES, minus `disabled`, DISABLED_RULES by default)
    on the file at `usd_path` (.usda or .usdz), in every variant; each distinct issue once."""
    av = asset_validator()
    disabled = DISABLED_RULES if disabled is None else disabled
    usd_path = existing_twin(usd_path)
    engine = av.ValidationEngine(variants=True)
    for name in EXTRA_RULES:
        engine.enable_rule(getattr(av, name))
    for name in disabled:
        rule = getattr(av, name, None)
        if rule is None:
            raise TwinscanError(f"the Asset Validator has no rule {name}", "check the rule's name in DISABLED_RULES")
        engine.disable_rule(rule)
    results = engine.validate(str(usd_path))
    issues: dict[tuple, AssetIssue] = {}
    for issue in results.issues():
        found = AssetIssue(severity=issue.severity.name.lower(),
                           rule=issue.rule.__name__ if issue.rule is not None else "Validator",
                           prim=_where(issue.at), message=" ".join(str(issue.message).split()))
        issues.setdefault((found.severity, found.rule, found.prim, found.message), found)
    order = {"failure": 0, "error": 1, "warning": 2}
    ranked = sorted(issues.values(), key=lambda item: (order.get(item.severity, 3), item.rule, item.prim))
    return AssetValidation(tuple(ranked), tuple(sorted(rule.__name__ for rule in engine.rules)), dict(disabled),
                           str(av.get_version()) if hasattr(av, "get_version") else "")


def _where(at: object) -> str:
    """The prim path an issue's location names (its `path`, or its prim's), else ""."""
    if at is None:
        return ""
    for candidate in (at, getattr(at, "prim_id", None)):
        path = getattr(candidate, "path", None)
        if path is not None and str(path):
            return str(path)
    return ""
