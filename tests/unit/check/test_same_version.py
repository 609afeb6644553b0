"""flashinfer-jit-cache at another version than flashinfer-python (flashinfer #4337)."""

from __future__ import annotations

from pathlib import Path

from stackmatrix.check.inventory import read_inventory
from stackmatrix.check.samever import same_version_findings
from stackmatrix.findings import Severity


def _dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("")


def test_a_jit_cache_of_another_version_is_refused(tmp_path: Path) -> None:
    _dist(tmp_path, "flashinfer-python", "0.6.4")
    _dist(tmp_path, "flashinfer-jit-cache", "0.6.3+cu130")
    (found,) = same_version_findings(read_inventory([tmp_path]), "c")
    assert found.code == "SM-VERSION-MISMATCH" and found.severity is Severity.FAIL
    assert found.message.startswith("flashinfer-python 0.6.4, flashinfer-jit-cache 0.6.3+cu130:")
    assert "#4337" in found.message


def test_the_same_version_with_a_local_label_is_fine(tmp_path: Path) -> None:
    _dist(tmp_path, "flashinfer-python", "0.6.4")
    _dist(tmp_path, "flashinfer-jit-cache", "0.6.4+cu130")
    _dist(tmp_path, "flashinfer-cubin", "0.6.4")
    assert same_version_findings(read_inventory([tmp_path]), "c") == []


def test_one_of_the_pair_alone_is_fine(tmp_path: Path) -> None:
    _dist(tmp_path, "flashinfer-python", "0.6.4")
    assert same_version_findings(read_inventory([tmp_path]), "c") == []
