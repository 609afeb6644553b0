"""A spec run for real (`python -m stackmatrix run`, every phase) with cells of
backend "current" whose engine is the fake `transformers` package of
tests/integration/explain/fakeroot (its decode speed set by a server argument)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FAKEROOT = Path(__file__).parents[1] / "integration" / "explain" / "fakeroot"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def run_spec(tmp_path: Path, spec_text: str) -> Path:
    """Run `spec_text` (its `{py}` and `{root}` filled in) and return the results
    directory; the run must succeed."""
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text.format(py=PY, root=FAKEROOT))
    run = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stackmatrix",
            "run",
            str(spec),
            "--output",
            str(run),
            "--work-dir",
            str(tmp_path / "work"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return run
