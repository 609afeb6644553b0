"""The backends a cell may be built with: one entry each, with what the spec needs to
know of it before anything is imported, so that no module outside builder/ keeps a
list of backend names.

How a backend builds a cell, runs its interpreter and starts its server is its class
(the `Backend` protocol of `builder/backends.py`), named here by `target` and imported
only when a cell needs it (`builder/backends.py` `get_backend`). This module imports
nothing of stackmatrix: the spec's parser and the CLI's choices read it.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "NAMES", "BackendEntry", "find", "owner_of"]


class BackendEntry(NamedTuple):
    name: str
    # "module:class" of its `Backend`, instantiated when a cell needs it
    target: str
    # the `[[cell]]` settings only this backend reads; the spec refuses them for a cell
    # of another backend
    cell_keys: tuple[str, ...] = ()


BACKENDS: tuple[BackendEntry, ...] = (
    BackendEntry(
        "venv",
        "stackmatrix.builder.backends:VenvBackend",
        cell_keys=("inherit", "offline", "no_deps"),
    ),
    BackendEntry("current", "stackmatrix.builder.backends:CurrentBackend"),
    BackendEntry("docker", "stackmatrix.builder.backends:DockerBackend"),
)
NAMES: tuple[str, ...] = tuple(b.name for b in BACKENDS)
DEFAULT_BACKEND = "venv"


def find(name: str) -> BackendEntry | None:
    return next((b for b in BACKENDS if b.name == name), None)


def owner_of(key: str) -> str | None:
    """The backend whose own setting `key` is (None: every backend's)."""
    return next((b.name for b in BACKENDS if key in b.cell_keys), None)
