"""The resolved lock of a cell: every distribution, its version and where it came from."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from stackmatrix.builder.base import LockEntry
from stackmatrix.errors import StackmatrixError
from stackmatrix.spec_model import Cell

_PIN_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)")
_FROM_LINE = re.compile(r"^\s+# from (\S+)")


def lockscript_path() -> Path:
    """The standalone script that lists an interpreter's installed distributions."""
    return Path(str(resources.files("stackmatrix.builder").joinpath("lockscript.py")))


def parse_compiled(text: str) -> dict[str, tuple[str, str]]:
    """`uv pip compile --emit-index-annotation` output -> {name: (version, source)}."""
    out: dict[str, tuple[str, str]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _PIN_LINE.match(line)
        if m:
            current = canonicalize_name(m.group(1))
            out[current] = (m.group(2), "unknown")
            continue
        f = _FROM_LINE.match(line)
        if f and current is not None:
            out[current] = (out[current][0], _source_kind(f.group(1)))
    return out


def _source_kind(url: str) -> str:
    if url.rstrip("/").endswith("/simple") or "/simple/" in url:
        return f"registry:{url}"
    return f"find-links:{url}" if url.startswith("file://") or "://" in url else f"path:{url}"


def parse_lockscript_output(
    text: str, cell: Cell, compiled: dict[str, tuple[str, str]] | None = None
) -> list[LockEntry]:
    """What lockscript.py printed -> sorted lock entries; `compiled` adds sources."""
    try:
        data = json.loads(text)
        dists = data["distributions"]
    except (ValueError, KeyError, TypeError) as exc:
        raise StackmatrixError(f"could not read the environment's package list: {exc}") from exc
    asked = pinned_names(cell.pins)
    entries = {}
    for d in dists:
        name = canonicalize_name(d["name"])
        source = d.get("direct") or (compiled or {}).get(name, ("", "unknown"))[1]
        entries[name] = LockEntry(
            name=name, version=str(d["version"]), source=source, requested=name in asked
        )
    return [entries[k] for k in sorted(entries)]


def pinned_names(pins: Sequence[str]) -> set[str]:
    return {canonicalize_name(Requirement(p).name) for p in pins}


def lock_digest(lock: Sequence[LockEntry]) -> str:
    import hashlib

    text = "\n".join(f"{e.name}=={e.version}" for e in sorted(lock, key=lambda e: e.name))
    return hashlib.sha256(text.encode()).hexdigest()
