"""`twinscan check`: is the twin valid USD in metres, and does a physics engine stand probes on its colliders?"""

from twinscan.check.config import CheckConfig
from twinscan.check.physics import newton_available
from twinscan.check.plot import plot_probes
from twinscan.check.report import CheckReport, ProbeResult
from twinscan.check.run import check_twin
from twinscan.check.validate import UnitsFacts

__all__ = ["CheckConfig", "CheckReport", "ProbeResult", "UnitsFacts", "check_twin", "newton_available", "plot_probes"]
