"""Reading a JSON value into a typed field: what does not fit is left out, never an error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Protocol, TypeAlias, runtime_checkable

# A JSON value as json.loads returns it, and an object of them: what a record reads and
# writes. Where other modules read a field's values loosely, the field says `Any` itself.
JSONValue: TypeAlias = "str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = dict[str, JSONValue]


@runtime_checkable
class _Record(Protocol):
    def to_dict(self) -> JSONObject: ...


def obj(value: object) -> JSONObject:
    return dict(value) if isinstance(value, dict) else {}


def objs(value: object) -> list[JSONObject]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def maybe_obj(value: object) -> JSONObject | None:
    """An object that may be absent (None) or empty ({}), kept apart."""
    return dict(value) if isinstance(value, dict) else None


def numbers(value: object) -> dict[str, float] | None:
    """An object of figures (a summary): its values that are numbers, None when absent."""
    if not isinstance(value, dict):
        return None
    return {
        k: v for k, v in value.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }


def string(value: object) -> str | None:
    return value if isinstance(value, str) else None


def integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def number(value: object) -> float | None:
    """A metric's value; as the report always read them, a bool counts as a number."""
    return float(value) if isinstance(value, int | float) else None


def real(value: object) -> float | None:
    """A number as it was written (an int stays an int)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def extra_keys(raw: Mapping[str, JSONValue], cls: type) -> JSONObject:
    known = {f.name for f in fields(cls)} - {"extra"}
    return {k: v for k, v in raw.items() if k not in known}


def present(pairs: Mapping[str, JSONValue]) -> JSONObject:
    """The keys to write: a None field was absent when read (or is not set)."""
    return {k: v for k, v in pairs.items() if v is not None}


def plain(value: object) -> JSONValue:
    """A field's value as JSON has it: records as dicts, tuples as lists; anything else
    as its text, which is how the results' writer (_atomic.py) writes it."""
    if isinstance(value, _Record):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float):
        return value
    return str(value)


def written(record: Any) -> JSONObject:
    """A record (a dataclass with `extra`) as written: its fields in their order, a None
    one left out (it was absent when read, or is not set), and the keys it did not know
    where its `extra` field stands (last, but for a launch's teardown: see LaunchRecord)."""
    out: JSONObject = {}
    for f in fields(record):
        if f.name == "extra":
            out.update(record.extra)
        elif (value := getattr(record, f.name)) is not None:
            out[f.name] = plain(value)
    return out
