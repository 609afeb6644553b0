"""Collect validation problems so a spec reports all of them at once."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from stackmatrix._secrets import mask_url_passwords


class Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        # a message quotes the value: an index URL's password must not reach stderr or CI
        self.items.append(f"{path}: {mask_url_passwords(message)}")

    def __bool__(self) -> bool:
        return bool(self.items)

    def unknown_keys(self, path: str, table: Mapping[str, Any], known: Iterable[str]) -> None:
        known = sorted(known)
        for key in table:
            if key in known:
                continue
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
            self.add(join(path, key), f"unknown key {key!r}{hint}")


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def type_name(value: object) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)
