"""Figures as people read them: the one formatter for every number twinscan shows (CLI tables, batch summary).

- integers (and floats holding a whole number, as USD metadata returns them) with thousands separators:
  `19,904`, never `1.99e+04`;
- other floats to 4 significant digits in fixed notation (`0.2925`, `26.66`, `1,250`), never exponents;
- a figure named with a unit suffix carries that unit, in a size a person reads: `worst_rest_error_m`
  0.0001707 is `0.17 mm`, `voxel_size_m` 0.0337 is `3.37 cm`, `psnr` 26.658 is `26.66 dB`.
"""

from __future__ import annotations

import math
from typing import Any

SIGNIFICANT = 4

# name suffix (or whole name) -> unit shown after the value
_UNITS = (("_m2", " m²"), ("_deg", "°"), ("_px", " px"), ("_s", " s"), ("seconds", " s"), ("_db", " dB"),
          ("psnr", " dB"))


def number(value: float, significant: int = SIGNIFICANT) -> str:
    """A number in fixed notation: whole values and values of 10^significant or more with thousands
    separators and no decimals, others to `significant` significant digits (trailing zeros dropped)."""
    if not math.isfinite(value):
        return str(value)
    if float(value).is_integer() or abs(value) >= 10 ** significant:
        return f"{round(value):,}"
    decimals = max(0, significant - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _metres(value: float) -> str:
    size = abs(value)
    if size == 0 or size >= 1:
        return f"{number(value)} m"
    if size >= 0.01:
        return f"{number(value * 100, 3)} cm"
    return f"{number(value * 1000, 3 if size >= 1e-4 else 2)} mm"


def format_figure(value: Any, name: str = "") -> str:
    """One figure as text; `name` (the figure's key, e.g. `worst_rest_error_m`) gives its unit."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "–"
    if isinstance(value, (int, float)):
        key = name.lower()
        if key.endswith("_m"):
            return _metres(value)
        for suffix, unit in _UNITS:
            if key.endswith(suffix):
                return number(value) + unit
        return number(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return format_figure(value.item(), name)
    return str(value)
