"""The `check` phase: prove a cell's stack is coherent before anything runs.

Static analysis of the environment's files (inventory, shared libraries, symbols,
CUDA majors, GPU-arch coverage, driver) plus the runtime probe, folded into one
verdict from findings with stable codes (docs/compat.md lists every code).

The public entry point; the work lives in:
- extension.py: discovery and per-extension analysis (each analysis module builds its
  own findings: libs, symbols, coverage, driver, probe, scan);
- static.py: the static check of a tree, `CheckOutcome` and `verdict_of`;
- environment.py: `check_environment` (scan cache, driver, known-bad, features, probe);
- inspection.py: `inspect_path` (wheels, files, directories; light to import).
"""

from __future__ import annotations

from stackmatrix.check.environment import check_environment
from stackmatrix.check.inspection import inspect_path
from stackmatrix.check.render import render_text
from stackmatrix.check.static import CheckOutcome, Verdict, verdict_of

__all__ = [
    "CheckOutcome",
    "Verdict",
    "check_environment",
    "inspect_path",
    "render_text",
    "verdict_of",
]
