"""The committed example under reports/examples/story/ is what the code produces."""

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_example_report", ROOT / "scripts" / "make_example_report.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_example_is_up_to_date(tmp_path):
    assert _script().main(["--out", str(tmp_path)]) == 0
    committed = ROOT / "reports" / "examples" / "story"
    for name in ("matrix.md", "matrix.html", "matrix.json", "junit.xml"):
        produced = (tmp_path / name).read_text()
        assert "SYNTHETIC DATA" in produced or name == "junit.xml"
        assert produced == (committed / name).read_text(), (
            f"reports/examples/story/{name} is stale: run scripts/make_example_report.py"
        )
    md = (tmp_path / "matrix.md").read_text()
    assert "| cu130-flashinfer |" in md and "no significant change" not in md
    row = "| cu130-flashinfer | 89.7 [88.5, 90.3] | 5 x 3 | -0.8% [-3.3%, +1.7%] | inconclusive"
    assert row in md
    assert "| cu130-pypi-kernel (baseline)" not in md and "incompatible" in md
