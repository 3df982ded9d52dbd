"""Progress for long work (rich), on stderr so stdout stays for results."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

console = Console(stderr=True)


@contextlib.contextmanager
def progress_bar(description: str, total: float | None) -> Iterator[Callable[..., None]]:
    """Yield `advance(n=1, status="...")`; `status` is a short free text shown after the bar."""
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TaskProgressColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
               TextColumn("{task.fields[status]}")]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(description, total=total, status="")

        def advance(n: float = 1, status: str | None = None) -> None:
            if status is None:
                progress.advance(task, n)
            else:
                progress.update(task, advance=n, status=status)

        yield advance
