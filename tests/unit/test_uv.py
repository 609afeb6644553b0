from __future__ import annotations

from pathlib import Path

import pytest

from stackmatrix.builder._uv import find_python, index_args, unreachable_index
from stackmatrix.spec_model import Cell

UV_DNS_ERROR = """error: Request failed after 3 retries in 9.2s
  cause: Failed to fetch: https://download.pytorch.org/whl/cu128/torch/
  cause: error sending request for url (https://download.pytorch.org/whl/cu128/torch/)
  cause: dns error
"""


def test_find_python_prefers_pyenv_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = tmp_path / "versions" / "3.12.9" / "bin" / "python3.12"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (tmp_path / "versions" / "3.1.5" / "bin").mkdir(parents=True)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    assert find_python("3.12") == str(exe)
    assert find_python("3.1") in ("3.1", "/usr/bin/python3.1", "/usr/local/bin/python3.1")


def test_unreachable_index_names_the_declared_index() -> None:
    cell = Cell(id="c", extra_index_urls=("https://download.pytorch.org/whl/cu128",))
    assert unreachable_index(UV_DNS_ERROR, cell) == "https://download.pytorch.org/whl/cu128"
    assert unreachable_index("error: No solution found", cell) is None


def test_index_args_are_argv_pairs_and_resolve_relative_paths(tmp_path: Path) -> None:
    cell = Cell(
        id="c", index_url="https://x/simple", find_links=("./wheels",), torch_backend="cu130"
    )
    args = index_args(cell, tmp_path)
    assert args == [
        "--index-url",
        "https://x/simple",
        "--find-links",
        str((tmp_path / "wheels").resolve()),
        "--torch-backend",
        "cu130",
    ]
