"""JSON that others may have written, parsed with its nesting bounded.

`json.loads` of a value nested 100,000 deep raises RecursionError (not the ValueError
every reader handles), and one a little under the interpreter's limit parses but
overflows the stack of the first recursive walk over it (redaction, the report's
rendering). No file stackmatrix writes nests a tenth of MAX_DEPTH deep.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

MAX_DEPTH = 64
# a JSON string (its brackets are not nesting) and what is left to count
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class TooDeepError(ValueError):
    """The text nests deeper than MAX_DEPTH: refused before it is parsed."""


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads(text)`, or a ValueError (TooDeepError) when arrays and objects nest
    more than `max_depth` deep."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")  # a UnicodeDecodeError is a ValueError too
    # no deeper than it has brackets: most lines (a request record) are not scanned
    if text.count("[") + text.count("{") > max_depth and depth(text) > max_depth:
        raise TooDeepError(f"arrays and objects nested more than {max_depth} deep")
    return json.loads(text)


def depth(text: str) -> int:
    """How deep the arrays and objects of JSON text nest (for text that is not JSON,
    a bound the parser would meet first): one pass, in C, over the brackets outside
    strings; about as long as parsing the text."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)
