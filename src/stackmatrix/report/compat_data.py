"""Where the compatibility knowledge kept as data lives (the repository's compat/)."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from stackmatrix._datadir import ENV_VAR, compat_dir
from stackmatrix.errors import Unreadable

_ENV = ENV_VAR
__all__ = ["compat_dir", "integer", "load_toml", "strings", "table", "tables"]


def load_toml(name: str, directory: Path | None = None) -> Mapping[str, object]:
    """A compat/ file's tables, read loosely: the accessors below narrow its values."""
    path = (directory or compat_dir()) / name
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise Unreadable(
            f"{path} is missing: the report reads its rules from there; set {_ENV} "
            "to the compat/ directory of a stackmatrix checkout"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise Unreadable(f"{path} is not valid TOML: {exc}") from exc


def table(value: object) -> Mapping[str, object]:
    """A table ([ignore]); empty when absent or not a table."""
    return value if isinstance(value, dict) else {}


def tables(value: object) -> list[Mapping[str, object]]:
    """The tables of an array of tables ([[rule]]); what is not a table is left out."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def strings(value: object) -> tuple[str, ...]:
    """An array of strings (`match = [...]`); none when absent or not an array."""
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def integer(value: object) -> int:
    """int() of a number (or its text); anything else raises TypeError, as int() does."""
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"expected a number, got {type(value).__name__}")
