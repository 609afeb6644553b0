"""Standalone script run with a cell's interpreter: prints its installed distributions.

It must not import stackmatrix (cell environments don't have it) and must run on
the oldest Python a cell may use, so it sticks to the standard library.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata


def _source(dist: metadata.Distribution) -> str | None:
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    url = str(info.get("url", ""))
    if url.startswith("file://"):
        return "path:" + url[len("file://") :]
    return "url:" + url


def main() -> None:
    out = []
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        requested = dist.read_text("REQUESTED") is not None
        out.append(
            {
                "name": name,
                "version": dist.version,
                "direct": _source(dist),
                "installer": (dist.read_text("INSTALLER") or "").strip(),
                "requested": requested,
            }
        )
    json.dump({"python": sys.version.split()[0], "distributions": out}, sys.stdout)


if __name__ == "__main__":
    main()
