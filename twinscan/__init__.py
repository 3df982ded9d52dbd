"""twinscan: a phone walkthrough video in, a simulation-ready OpenUSD digital twin out."""

__version__ = "0.1.0"
