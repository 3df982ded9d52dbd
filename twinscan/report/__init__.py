"""OUT/report.html: one self-contained page (images embedded) that shows how a capture went."""

from twinscan.report.build import build_report
from twinscan.report.stage import REPORT, write_report

__all__ = ["REPORT", "build_report", "write_report"]
