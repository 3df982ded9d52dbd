"""Progress for long work (rich), on stderr so stdout stays for results; and the one way to print a line.

Text that reaches the terminal is never read as rich markup: paths, errors, warnings and figures carry
square brackets (`twinscan[ray]`, `cell [take 2].mp4`, even `[/b]`), and markup would eat them or raise
`MarkupError`. So the console has markup off, and styles are given as (text, style) parts (`say`, `styled`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text

console = Console(stderr=True, markup=False)

STEPWISE = 20  # a bar of at most this many steps is redrawn at each one
Part = str | tuple[str, str]  # literal text, or (literal text, rich style)


def styled(*parts: Part) -> Text:
    """One rich Text from literal parts: a str is shown as written, `(text, style)` in that style."""
    return Text.assemble(*((str(part[0]), part[1]) if isinstance(part, tuple) else str(part) for part in parts))


def say(*parts: Part) -> None:
    """Print one line made of literal parts (see `styled`), unwrapped, without rich's highlighting."""
    console.print(styled(*parts), highlight=False, soft_wrap=True)


@contextlib.contextmanager
def progress_bar(description: str, total: float | None) -> Iterator[Callable[..., None]]:
    """Yield `advance(n=1, status="...")`; `status` is a short free text shown after the bar.

    A bar of a few steps (a stage's phases) is redrawn at every step, so none is skipped on screen
    (rich redraws ten times a second: two steps in one tenth showed as 4/6 then 6/6)."""
    columns = [TextColumn("{task.description}", style="bold", markup=False), BarColumn(), MofNCompleteColumn(),
               TaskProgressColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
               TextColumn("{task.fields[status]}", markup=False)]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(description, total=total, status="")
        stepwise = total is not None and total <= STEPWISE

        def advance(n: float = 1, status: str | None = None) -> None:
            if status is None:
                progress.advance(task, n)
            else:
                progress.update(task, advance=n, status=status)
            if stepwise:
                progress.refresh()

        yield advance
