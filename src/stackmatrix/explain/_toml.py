"""A TOML writer for the derived specs explain writes (strings, numbers, booleans, lists,
tables, arrays of tables: what a spec holds)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any


def dumps(data: Mapping[str, Any]) -> str:
    lines: list[str] = []
    _table(data, (), lines)
    return "\n".join(lines).strip() + "\n"


def _table(data: Mapping[str, Any], path: tuple[str, ...], lines: list[str]) -> None:
    plain = {k: v for k, v in data.items() if not _nested(v) and v is not None}
    for key, value in plain.items():
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in data.items():
        if isinstance(value, Mapping):
            lines += ["", f"[{'.'.join(_key(p) for p in (*path, key))}]"]
            _table(value, (*path, key), lines)
        elif _nested(value):
            for item in value:
                lines += ["", f"[[{'.'.join(_key(p) for p in (*path, key))}]]"]
                _table(item, (*path, key), lines)


def _nested(value: Any) -> bool:
    if isinstance(value, Mapping):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _key(key: str) -> str:
    return key if _BARE.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")
