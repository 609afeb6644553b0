"""The one rule for a cell id: the spec checks it when it is parsed, and every reader
that makes a path of an id it finds recorded (run.json, plan.json) checks it again.

An id names the cell's directory, `RUN/cells/<id>/`: a recorded `../../other/cells/x`
would have the report read, and publish, another directory's results, and merge write
outside its output. An id of the spec's form is one plain path component.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from stackmatrix.errors import Unreadable

# `~`, `=`, `+` and `,` let explain name derived cells (`cu130~attention_backend=flashinfer`)
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~=+,-]{0,127}$")


def is_cell_id(value: object) -> bool:
    return isinstance(value, str) and ID_RE.match(value) is not None


def refuse_unsafe(ids: Iterable[object], where: object) -> None:
    """Raise Unreadable (exit 3 uncaught) naming `where` when any of `ids` is not a cell id the
    spec could define."""
    for cell_id in ids:
        if not is_cell_id(cell_id):
            raise Unreadable(unsafe_message(cell_id, where))


def unsafe_message(cell_id: object, where: object) -> str:
    return (
        f"{where}: cell id {cell_id!r} is not a plain name (a spec's cell ids match "
        f"{ID_RE.pattern}); as a path it could name files outside the results directory, "
        "so nothing is read or written for it. This file was not written by stackmatrix: "
        "restore it from the run's artifacts"
    )
