"""The one error type users see: what went wrong, and what to do about it."""

from __future__ import annotations


class TwinscanError(Exception):
    """A failure the user can act on. The CLI prints it as one line and exits non-zero."""

    def __init__(self, what: str, fix: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.fix = fix

    def one_line(self) -> str:
        return f"{self.what} -- {self.fix}" if self.fix else self.what
