"""A stage's typed record: the facts later stages read of it, as one JSON file inside the stage's atomic
output, so it describes the files on disk or is absent with them.

Each producing stage's package owns its record (a frozen dataclass with `to_json` / `from_json`) and
a `read_*` function over `read_record`. The manifest's figures are for people; stages read records.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from twinscan.errors import TwinscanError
from twinscan.workspace import Workspace

Record = TypeVar("Record")


def read_record(ws: Workspace, relative: str, command: str, from_json: Callable[[Any], Record]) -> Record:
    """The record at OUT/`relative`; a one-line error saying which `command` makes it when it is missing (the
    stage has not run, or ran under a twinscan from before the record) or unreadable (an older record)."""
    path = ws.path(relative)
    if not path.is_file():
        raise TwinscanError(f"{path} is missing", f"run `{command}` (with --force on an older workspace)")
    try:
        return from_json(json.loads(path.read_text()))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as error:
        raise TwinscanError(f"{path} cannot be read ({error})", f"run `{command} --force`") from error
