"""Turn failures into one line, a non-zero exit, and a hint; never a traceback for user errors."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from twinscan.errors import TwinscanError
from twinscan.progress import say

F = TypeVar("F", bound=Callable[..., Any])

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


def user_errors(command: F) -> F:
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except TwinscanError as error:
            say(("error:", "bold red"), " ", error.one_line())  # literal: paths and hints carry [ ]
            raise typer.Exit(EXIT_USER_ERROR) from None
        except KeyboardInterrupt:
            say(("interrupted", "yellow"), " -- run the same command again to resume where it stopped")
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]
