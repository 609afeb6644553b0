"""The shared objects a live server mapped: read from /proc/<pid>/maps of every process
of the server's own process group (every rank of a tensor-parallel server is a child in
it), after its measured rounds, when lazily loaded kernels are mapped too. What the
serving path really loads, beside the check's static import of it (check/relevance.py).
Reading only, and only our own server's group (servers start in a session of their own)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stackmatrix.bench.server import group_pids
from stackmatrix.jsontypes import JSONObject

MAX_MAPS_BYTES = 16 << 20  # one process's maps: sglang's are a few hundred KB
MAX_LIBRARIES = 5000


@dataclass(frozen=True, kw_only=True)
class Mapped:
    processes: int
    libraries: tuple[str, ...]
    truncated: bool

    def to_dict(self) -> JSONObject:
        return {
            "processes": self.processes,
            "libraries": list(self.libraries),
            "truncated": self.truncated,
        }


def shared_objects(maps_text: str) -> set[str]:
    """Absolute paths of mapped shared objects (`x.so`, `x.so.12`, `x.abi3.so`)."""
    out = set()
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6:
            path = parts[5].removesuffix(" (deleted)")
            if path.startswith("/") and (path.endswith(".so") or ".so." in path):
                out.add(path)
    return out


def _read(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            return fh.read(MAX_MAPS_BYTES).decode("utf-8", "replace")
    except OSError:  # the process ended, or is not ours to read
        return ""


def server_mapped(pgid: int) -> Mapped | None:
    """The union over the group's processes; None where nothing could be read."""
    pids = group_pids(pgid)
    found: set[str] = set()
    read = 0
    for pid in pids:
        text = _read(Path("/proc") / str(pid) / "maps")
        if text:
            read += 1
            found |= shared_objects(text)
    if not read:
        return None
    ordered = sorted(found)
    return Mapped(
        processes=read,
        libraries=tuple(ordered[:MAX_LIBRARIES]),
        truncated=len(ordered) > MAX_LIBRARIES,
    )
