"""The checks of one value of a spec, each adding its problem (key path, the value
with !r) to the collected ones and giving back what is usable, else None; and the
accessors of a key of a table (`get_int(raw, key, path, p)`: absent is None)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlparse

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from stackmatrix._validate import Problems, join, type_name

CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
SHELLISH_RE = re.compile(r"[;&|`$<>\\]|\$\(")

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_bool(val: Any, path: str, p: Problems) -> bool:
    if isinstance(val, bool):
        return val
    p.add(path, f"expected true or false, got {type_name(val)} {val!r}")
    return False


def check_str(
    val: Any, path: str, p: Problems, pattern: re.Pattern[str] | None = None, what: str = ""
) -> str | None:
    if val is None:
        return None
    if not isinstance(val, str):
        p.add(path, f"expected a string, got {type_name(val)} {val!r}")
        return None
    if CONTROL_RE.search(val):
        p.add(path, f"{val!r} contains control characters (newline, NUL...)")
        return None
    if pattern is not None and not pattern.match(val):
        p.add(path, f"{val!r} is not {what or 'valid'} (expected to match {pattern.pattern})")
        return None
    return val


def check_opt(
    v: Mapping[str, Any],
    key: str,
    path: Callable[[str], str],
    p: Problems,
    pattern: re.Pattern[str] | None = None,
    what: str = "",
) -> str | None:
    return check_str(v.get(key), path(key), p, pattern, what)


def check_choice(val: Any, path: str, choices: tuple[str, ...], p: Problems) -> str | None:
    if isinstance(val, str) and val in choices:
        return val
    p.add(path, f"{val!r} is not one of {', '.join(choices)}")
    return None


def check_int(
    val: Any, path: str, p: Problems, minimum: int | None = None, maximum: int | None = None
) -> int | None:
    if isinstance(val, bool) or not isinstance(val, int):
        p.add(path, f"expected an integer, got {type_name(val)} {val!r}")
        return None
    if minimum is not None and val < minimum:
        p.add(path, f"{val!r} is below the minimum {minimum}")
        return None
    if maximum is not None and val > maximum:
        p.add(path, f"{val!r} is above the maximum {maximum}")
        return None
    return val


def check_list(val: Any, path: str, p: Problems) -> list[str]:
    if not isinstance(val, list):
        p.add(path, f"expected an array of strings, got {type_name(val)} {val!r}")
        return []
    out = []
    for i, item in enumerate(val):
        s = check_str(item, join(path, i), p)
        if s is not None:
            out.append(s)
    return out


def check_pins(val: Any, path: str, p: Problems) -> list[str]:
    pins = []
    for i, pin in enumerate(check_list(val, path, p)):
        try:
            req = Requirement(pin)
        except InvalidRequirement as exc:
            p.add(join(path, i), f"{pin!r} is not a PEP 508 requirement: {exc}")
            continue
        if req.url and SHELLISH_RE.search(req.url):
            p.add(join(path, i), f"{pin!r} has shell syntax in its URL; remove it")
            continue
        pins.append(str(req))
    names = [canonicalize_name(Requirement(x).name) for x in pins]
    for dup in duplicates(names):
        p.add(path, f"package {dup!r} is pinned more than once in this cell")
    return pins


def check_url(val: Any, path: str, p: Problems) -> str | None:
    s = check_str(val, path, p)
    if s is None:
        return None
    try:
        parsed = urlparse(s)
    except ValueError as exc:  # e.g. "https://[::1": an unclosed IPv6 address
        p.add(path, f"{s!r} is not a valid URL: {exc}")
        return None
    if parsed.scheme in ("http", "https", "file") and (parsed.netloc or parsed.scheme == "file"):
        if not SHELLISH_RE.search(s):
            return s
    elif not parsed.scheme and s.startswith(("/", "./", "../")) and not SHELLISH_RE.search(s):
        return s  # a local directory (find-links / flat index)
    p.add(path, f"{s!r} is not an http(s)/file URL or a local path")
    return None


def check_urls(
    v: Mapping[str, Any], key: str, path: Callable[[str], str], p: Problems
) -> list[str]:
    urls = []
    for i, item in enumerate(check_list(v.get(key, []), path(key), p)):
        url = check_url(item, join(path(key), i), p)
        if url is not None:
            urls.append(url)
    return urls


def check_env(val: Any, path: str, p: Problems) -> tuple[tuple[str, str], ...]:
    if not isinstance(val, dict):
        p.add(path, f'expected a table of NAME = "value", got {type_name(val)}')
        return ()
    out = []
    for key, item in val.items():
        if not ENV_NAME_RE.match(key):
            p.add(join(path, key), f"{key!r} is not a valid environment variable name")
        s = check_str(item, join(path, key), p)
        if s is not None:
            out.append((key, s))
    return tuple(sorted(out))


def get_table(raw: Mapping[str, Any], key: str, path: str, p: Problems) -> Mapping[str, object]:
    val = raw.get(key, {})
    if not isinstance(val, dict):
        p.add(join(path, key), f"expected a table, got {type_name(val)}")
        return {}
    return val


def get_table_list(raw: Mapping[str, Any], key: str, p: Problems) -> list[Mapping[str, object]]:
    val = raw.get(key, [])
    if not isinstance(val, list) or not all(isinstance(x, dict) for x in val):
        p.add(key, f"expected an array of tables ([[{key}]]), got {val!r}")
        return []
    return val


def get_str(
    raw: Mapping[str, Any], key: str, path: str, p: Problems, required: bool = False
) -> str | None:
    if key not in raw:
        if required:
            p.add(join(path, key), f'missing; add {key} = "..."')
        return None
    return check_str(raw[key], join(path, key), p)


def get_int(
    raw: Mapping[str, Any],
    key: str,
    path: str,
    p: Problems,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    if key not in raw:
        return None
    return check_int(raw[key], join(path, key), p, minimum, maximum)


def get_float(
    raw: Mapping[str, Any], key: str, path: str, p: Problems, lo: float, hi: float
) -> float | None:
    if key not in raw:
        return None
    val = raw[key]
    if val == "inf":
        val = math.inf
    if isinstance(val, bool) or not isinstance(val, int | float):
        p.add(join(path, key), f"expected a number, got {type_name(val)} {val!r}")
        return None
    if not lo <= float(val) <= hi:
        p.add(join(path, key), f"{val!r} is outside [{lo}, {hi}]")
        return None
    return float(val)


def get_choice(
    raw: Mapping[str, Any], key: str, path: str, choices: tuple[str, ...], p: Problems
) -> str | None:
    if key not in raw:
        return None
    return check_choice(raw[key], join(path, key), choices, p)


def get_str_list(
    raw: Mapping[str, Any],
    key: str,
    path: str,
    p: Problems,
    pattern: re.Pattern[str] | None = None,
    what: str = "",
) -> list[str]:
    out = []
    for i, item in enumerate(check_list(raw.get(key, []), join(path, key), p)):
        s = check_str(item, join(join(path, key), i), p, pattern, what)
        if s is not None:
            out.append(s)
    return out


def duplicates(items: Iterable[str]) -> list[str]:
    """Linear: `list.count` per item made 40k cells take 40 s."""
    return sorted(k for k, n in Counter(items).items() if n > 1)


def or_default(value: float | None, default: float) -> float:
    return default if value is None else value
