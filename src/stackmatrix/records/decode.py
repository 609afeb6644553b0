"""Reading JSON into the typed records: `decode` builds a record from its fields' types
and `problem` says where a file departs from them; what does not fit is left out of the
record, never an error."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from types import UnionType
from typing import (
    Any,
    Protocol,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    runtime_checkable,
)

from stackmatrix.jsontypes import JSONObject, JSONValue


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


# -- one reader for every record: its fields say what each key holds --------------------

T = TypeVar("T")
_JSON_TYPES = {str: "str", int: "int", float: "float", bool: "bool"}


def decode(cls: type[T], raw: Mapping[str, JSONValue], where: str = "") -> T:
    """`raw` read into the record `cls` by its fields: a value that does not fit its
        field's type (see `problem`) is left out (the field's default), keys no field names
    go to `extra`. A field's `metadata["read"]` reads its raw value itself (None where
    the key is missing); what is there must still fit the field's type."""
    return _record(cls, raw, where, [])


def problem(cls: type, raw: object, where: str = "") -> str | None:
    """Where `raw` first departs from the record `cls`, said for a person (for example
    "data.launches[0].rounds is int 3, not a list"); None when it fits. A missing key or
    a null fits every field."""
    found: list[str] = []
    if not isinstance(raw, dict):
        return f"{where or 'the file'} is {type(raw).__name__}, not an object"
    _record(cls, raw, where, found)
    return found[0] if found else None


def _record(cls: type[T], raw: Mapping[str, JSONValue], where: str, found: list[str]) -> T:
    names = vars(sys.modules[cls.__module__])
    values: dict[str, object] = {}
    for f in fields(cast(Any, cls)):
        if "read" in f.metadata:  # the field reads its value, present or not
            values[f.name] = f.metadata["read"](raw.get(f.name))
        if f.name == "extra" or f.name not in raw:
            continue
        hint = eval(f.type, names) if isinstance(f.type, str) else f.type  # noqa: S307
        value = _value(hint, raw[f.name], f"{where}.{f.name}".lstrip("."), found)
        if value is not _MISSING and value is not None and "read" not in f.metadata:
            values[f.name] = value
    if "extra" in {f.name for f in fields(cast(Any, cls))}:
        values["extra"] = extra_keys(raw, cls)
    return cls(**values)


_MISSING = object()


def _value(hint: Any, value: object, where: str, found: list[str]) -> object:
    """`value` as `hint` has it; _MISSING, and the reason in `found`, where it does not fit."""
    if value is None or hint is Any or isinstance(hint, str) or hint is object:
        return value  # a null, or a JSON value kept as it is
    if hint == JSONObject:
        return dict(value) if isinstance(value, dict) else _fail(found, where, value, "an object")
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, UnionType):
        kinds = [a for a in args if a is not type(None)]
        if len(kinds) == 1:
            return _value(kinds[0], value, where, found)
        for kind in kinds:
            probe: list[str] = []
            fits = _value(kind, value, where, probe)
            if not probe:
                return fits
        return _fail(found, where, value, " or ".join(_said(k) for k in kinds))
    if origin in (list, tuple):
        if not isinstance(value, list):
            return _fail(found, where, value, "a list")
        items = [_item(args[0], v, f"{where}[{i}]", found) for i, v in enumerate(value)]
        kept = [v for v in items if v is not _MISSING]
        return tuple(kept) if origin is tuple else kept
    if origin is dict:
        if not isinstance(value, dict):
            return _fail(found, where, value, "an object")
        pairs = {k: _value(args[1], v, f"{where}.{k}", found) for k, v in value.items()}
        return {k: v for k, v in pairs.items() if v is not _MISSING}
    if is_dataclass(hint):
        if not isinstance(value, dict):
            return _fail(found, where, value, "an object")
        return _record(cast(Any, hint), value, where, found)
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return value  # an int stays an int, as it was written
    if isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    return _fail(found, where, value, _said(hint))


def _item(hint: Any, value: object, where: str, found: list[str]) -> object:
    """A list's item: a null does not fit (a list holds no nulls)."""
    if value is None:
        found.append(f"{where} is null")
        return _MISSING
    return _value(hint, value, where, found)


def _fail(found: list[str], where: str, value: object, kind: str) -> object:
    shown = "" if isinstance(value, dict | list) else f" {value!r:.40}"
    found.append(f"{where} is {type(value).__name__}{shown}, not {kind}")
    return _MISSING


def _said(hint: Any) -> str:
    if get_origin(hint) in (list, tuple):
        return "a list"
    if get_origin(hint) is dict or hint == JSONObject or is_dataclass(hint):
        return "an object"
    return _JSON_TYPES.get(hint, getattr(hint, "__name__", str(hint)))
