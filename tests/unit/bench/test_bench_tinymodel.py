from __future__ import annotations

import sys

import pytest

from stackmatrix.bench.tinymodel import (
    TinyModelError,
    make_tiny_model,
    script_text,
    tiny_model_main,
)
from stackmatrix.bench.workload import WORDS


def test_script_carries_the_word_list():
    text = script_text()
    assert "__WORDS__" not in text
    assert " ".join(WORDS) in text
    compile(text, "_tinymodel_script.py", "exec")


def test_an_interpreter_without_torch_gives_an_actionable_error(tmp_path):
    failing = [sys.executable, "-c", "raise SystemExit('No module named torch')"]
    with pytest.raises(TinyModelError, match="needs torch, transformers and"):
        make_tiny_model(tmp_path / "m", python=failing)


def test_cli_reports_failure(tmp_path, capsys):
    rc = tiny_model_main([str(tmp_path / "m"), "--python", "/nonexistent/python"])
    assert rc != 0
    assert "tiny model" in capsys.readouterr().err
