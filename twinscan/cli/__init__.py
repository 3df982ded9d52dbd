"""The `twinscan` command line: a thin layer over the stage functions."""
