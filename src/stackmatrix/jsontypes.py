"""The JSON types every results file is read and written as: a value as `json.loads`
returns it, and an object of them. Public and shared by every package, records/ and
the phases alike, so that no module needs a private one, or a type-only import, for
them."""

from __future__ import annotations

from typing import TypeAlias

# Where a module reads a field's values loosely, the field says `Any` itself.
JSONValue: TypeAlias = "str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = dict[str, JSONValue]
