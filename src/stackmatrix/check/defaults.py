"""Predictions that join a cell's server arguments with its install, before any GPU
time: an argument the cell leaves to the engine whose default, for this model on the
target GPU, needs a feature the install lacks (compat/features.toml
[[engine_default]]). On the H200, a cell without `--attention-backend` on an sglang
install without FlashAttention-3 died at every start ("Can not import FA3 in
sgl_kernel") while the check had reported the missing file as a warning of its own.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stackmatrix.check import data as _data
from stackmatrix.findings import Finding, Severity

CONFIG_LIMIT = 1 << 20  # a model's config.json is a few KB


def model_kinds(model: str | None) -> frozenset[str]:
    """The kinds of model a local model directory's config.json says it is."""
    if not model:
        return frozenset()
    raw = _read_config(Path(model) / "config.json")
    kinds = set()
    if isinstance(raw, dict) and _has(raw, "kv_lora_rank"):
        kinds.add("mla")
    return frozenset(kinds)


def _read_config(path: Path) -> Any:
    """A model's config.json: a regular file (a hub cache links its files: followed) of
    at most 1 MiB, or None (a hub name, a FIFO, garbage: nothing to predict from)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode) or path.stat().st_size > CONFIG_LIMIT:
            return None
        with path.open("rb") as fh:
            return json.loads(fh.read(CONFIG_LIMIT + 1))
    except (OSError, ValueError):
        return None


def _has(config: Mapping[str, Any], key: str) -> bool:
    text = config.get("text_config")
    return config.get(key) is not None or (isinstance(text, dict) and text.get(key) is not None)


def predictions(
    *,
    engine: str,
    server_args: Sequence[str],
    kinds: frozenset[str],
    targets: Sequence[str],
    findings: Sequence[Finding],
    cell: str | None,
) -> list[Finding]:
    """A failing finding for each engine default that resolves to a missing feature."""
    rules = _data.load("features.toml").get("engine_default", [])
    out = []
    for rule in rules:
        absent = _absent(findings, str(rule["needs_file"]))
        if (
            rule.get("engine") == engine
            and not _given(server_args, str(rule["argument"]))
            and str(rule["model"]) in kinds
            and set(targets) & set(rule.get("targets", []))
            and absent is not None
        ):
            out.append(_finding(rule, absent, targets, cell))
    return out


def _given(args: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def _absent(findings: Sequence[Finding], file: str) -> Finding | None:
    return next(
        (f for f in findings if f.code == "SM-FEATURE-ABSENT" and f.details.get("file") == file),
        None,
    )


def _finding(
    rule: Mapping[str, Any], absent: Finding, targets: Sequence[str], cell: str | None
) -> Finding:
    arg, default = str(rule["argument"]), str(rule["default"])
    hit = ", ".join(t for t in targets if t in rule.get("targets", []))
    return Finding(
        code="SM-DEFAULT-UNAVAILABLE",
        severity=Severity.FAIL,
        cell=cell,
        subject=f"{arg} {default}",
        message=(
            f"the cell does not pass {arg}, so the server takes {default}: "
            f"{rule['derived']} ({rule['model']} model, target {hit}); {absent.subject} "
            f"lacks {rule['needs_file']}, so every launch would die at start "
            f"({rule['log']!r}); {rule['advice']}"
        ),
        details={
            "argument": arg,
            "default": default,
            "file": str(rule["needs_file"]),
            "log": str(rule["log"]),
            "predicted_from": absent.code,
        },
    )
