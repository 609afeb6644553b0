"""Reading a JSON value into a typed field: what does not fit is left out, never an error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

Obj = dict[str, Any]


def obj(value: Any) -> Obj:
    return dict(value) if isinstance(value, dict) else {}


def objs(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def maybe_obj(value: Any) -> Obj | None:
    """An object that may be absent (None) or empty ({}), kept apart."""
    return dict(value) if isinstance(value, dict) else None


def string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def number(value: Any) -> float | None:
    """A metric's value; as the report always read them, a bool counts as a number."""
    return float(value) if isinstance(value, int | float) else None


def real(value: Any) -> float | None:
    """A number as it was written (an int stays an int)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def extra_keys(raw: Mapping[str, Any], cls: type) -> Obj:
    known = {f.name for f in fields(cls)} - {"extra"}
    return {k: v for k, v in raw.items() if k not in known}


def present(pairs: Mapping[str, Any]) -> Obj:
    """The keys to write: a None field was absent when read (or is not set)."""
    return {k: v for k, v in pairs.items() if v is not None}


def plain(value: Any) -> Any:
    """A field's value as JSON has it: records as dicts, tuples as lists."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def written(record: Any) -> Obj:
    """A record (a dataclass with `extra`) as written: its fields in their order, a None
    one left out (it was absent when read, or is not set), and the keys it did not know
    where its `extra` field stands (last, but for a launch's teardown: see LaunchRecord)."""
    out: Obj = {}
    for f in fields(record):
        if f.name == "extra":
            out.update(record.extra)
        elif (value := getattr(record, f.name)) is not None:
            out[f.name] = plain(value)
    return out
