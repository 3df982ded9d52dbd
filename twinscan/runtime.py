"""Process-wide settings for twinscan's CPU paths, set by one explicit call at an entry point (the CLI,
the test suite, a benchmark), never as a side effect of importing a module."""

from __future__ import annotations

import os


def init_runtime() -> None:
    """Call before torch or numba run anything (the OpenMP runtime reads its settings when it loads).

    - OMP_WAIT_POLICY=PASSIVE: numba's and torch's OpenMP workers spin-wait between parallel regions;
      on a 2-core machine the spinning starves the other runtime (small torch ops ran 45x slower);
    - numba's workqueue threading layer: GNU OpenMP threads spin after each parallel region, burning the
      cores that torch and the other tile workers need; workqueue's sleep.
    Settings the user made in the environment are kept.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if "NUMBA_THREADING_LAYER" not in os.environ:
        import numba

        numba.config.THREADING_LAYER = "workqueue"
