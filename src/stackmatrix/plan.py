"""Plan: the cells a spec expands to, each with a stable content hash.

The content hash covers everything that defines a cell's environment (python,
CUDA, backend, base image, pins, indexes, torch backend, CA bundles' contents),
so an unchanged cell is recognised across runs and its environment reused.
Runtime-only settings (env vars, server args) are in `run_hash` instead.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from stackmatrix._secrets import redact, redact_argv
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.spec_model import Cell, Spec

# Bump when the way environments are built changes, so old environments are rebuilt.
BUILDER_VERSION = 2
ENV_FIELDS = (
    "python",
    "cuda",
    "backend",
    "base_image",
    "pins",
    "index_url",
    "extra_index_urls",
    "find_links",
    "torch_backend",
    "ca_certs",
)
# Hashed only when set, so cells that do not use them keep their hashes (and envs).
LAYER_FIELDS = ("inherit", "offline", "no_deps")
RUN_FIELDS = ("env", "server_args", "gpus", "runs_on")


def cell_definition(cell: Cell) -> JSONObject:
    """The cell as plain JSON data (what plan.json and reports show)."""
    return {
        "id": cell.id,
        "python": cell.python,
        "cuda": cell.cuda,
        "backend": cell.backend,
        "base_image": cell.base_image,
        "pins": list(cell.pins),
        "index_url": cell.index_url,
        "extra_index_urls": list(cell.extra_index_urls),
        "find_links": list(cell.find_links),
        "torch_backend": cell.torch_backend,
        "ca_certs": list(cell.ca_certs),
        "inherit": cell.inherit,
        "offline": cell.offline,
        "no_deps": cell.no_deps,
        "env": dict(cell.env),
        "server_args": list(cell.server_args),
        "gpus": cell.gpus,
        "runs_on": list(cell.runs_on),
        "axes": dict(cell.axes),
    }


def _digest(data: JSONValue) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def content_hash(cell: Cell, spec_dir: Path | None = None) -> str:
    d = cell_definition(cell)
    env_part = {k: d[k] for k in ENV_FIELDS}
    env_part["pins"] = _strings(sorted(cell.pins))  # d["pins"] is list(cell.pins)
    env_part["ca_certs"] = [_file_digest(c, spec_dir) for c in cell.ca_certs]
    env_part["builder"] = BUILDER_VERSION
    env_part |= {k: d[k] for k in LAYER_FIELDS if d[k]}
    return _digest(env_part)


def run_hash(cell: Cell) -> str:
    d = cell_definition(cell)
    return _digest({k: d[k] for k in RUN_FIELDS})


def _file_digest(path: str, spec_dir: Path | None) -> str:
    p = Path(path) if spec_dir is None else (spec_dir / path)
    try:
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:
        return f"missing:{path}"  # the build reports the missing file; the hash stays stable


@dataclass(frozen=True, kw_only=True)
class PlannedCell:
    cell: Cell
    content_hash: str
    run_hash: str
    differs: dict[str, tuple[JSONValue, JSONValue]]  # field -> (baseline value, this cell's)
    is_baseline: bool

    @property
    def short_hash(self) -> str:
        return self.content_hash[:12]

    def to_dict(self) -> JSONObject:
        return {
            "id": self.cell.id,
            "content_hash": self.content_hash,
            "run_hash": self.run_hash,
            "baseline": self.is_baseline,
            "definition": {k: public(k, v) for k, v in cell_definition(self.cell).items()},
            "differs_from_baseline": {
                k: [public(k, old), public(k, new)] for k, (old, new) in self.differs.items()
            },
        }


def make_plan(spec: Spec) -> list[PlannedCell]:
    spec_dir = Path(spec.path).parent
    base = cell_definition(spec.baseline_cell)
    planned = []
    for cell in spec.cells:
        d = cell_definition(cell)
        differs = {k: (base[k], d[k]) for k in d if k not in ("id", "axes") and d[k] != base[k]}
        planned.append(
            PlannedCell(
                cell=cell,
                content_hash=content_hash(cell, spec_dir),
                run_hash=run_hash(cell),
                differs=differs,
                is_baseline=cell.id == spec.baseline,
            )
        )
    return planned


def public(field: str, value: Any) -> Any:
    """What plan.json, `plan` and the reports show of a field: the values of secret
    env names and server args hidden, credential-shaped strings anywhere hidden. The
    environments themselves get the real values."""
    if field == "server_args" and isinstance(value, list):
        return redact_argv([str(v) for v in value])
    return redact(value)


def describe_difference(field: str, old: Any, new: Any) -> str:
    """One short phrase for the plan table, e.g. 'cuda 12.8->13.0' or 'pins +x -y'."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        shown = public(field, {k: new.get(k) for k in keys})
        return f"{field} " + " ".join(f"{k}={shown[k]!s}" for k in keys)
    old, new = public(field, old), public(field, new)
    if isinstance(old, list) and isinstance(new, list):
        added = [x for x in new if x not in old]
        removed = [x for x in old if x not in new]
        parts = [f"+{x}" for x in added] + [f"-{x}" for x in removed]
        return f"{field} {' '.join(parts)}"
    return f"{field} {old}->{new}"


def _strings(values: list[str]) -> list[JSONValue]:
    return list(values)  # a copy: a list[str] is no list[JSONValue]


# One cell of the GitHub Actions matrix (its keys are spelled as the workflows use them).
MatrixEntry = TypedDict(
    "MatrixEntry",
    {"cell": str, "runs-on": list[str], "gpus": int, "content-hash": str, "baseline": bool},
)


class GithubMatrix(TypedDict):
    include: list[MatrixEntry]


def github_matrix(spec: Spec, default_runner: str = "ubuntu-latest") -> GithubMatrix:
    """The JSON a GitHub Actions `strategy.matrix` takes: one entry per cell."""
    include: list[MatrixEntry] = []
    for pc in make_plan(spec):
        labels = list(pc.cell.runs_on) or [default_runner]
        include.append(
            {
                "cell": pc.cell.id,
                "runs-on": labels,
                "gpus": pc.cell.gpus,
                "content-hash": pc.short_hash,
                "baseline": pc.is_baseline,
            }
        )
    return {"include": include}
