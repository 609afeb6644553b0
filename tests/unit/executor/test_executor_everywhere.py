"""`run`, `calibrate` and `explain`'s rounds all run through `executor.get_executor`:
the kind `--executor` names, else the spec's `[executor] kind`. A recording executor
stands in for the registry's target, so that nothing is built or measured here."""

from __future__ import annotations

from pathlib import Path

import pytest

import stackmatrix.executor
from stackmatrix import executor_registry
from stackmatrix.cli import main
from stackmatrix.explain.command import round_runner
from stackmatrix.pipeline import RunOptions
from stackmatrix.specfile import parse_spec

SPEC = """name = "m"
[[cell]]
id = "a"
pins = ["six==1.16.0"]
[bench]
model = "m"
[executor]
kind = "slurm"
partition = "gpu"
"""


class Taken(Exception):
    pass


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, RunOptions]]:
    seen: list[tuple[str, RunOptions]] = []

    def get_executor(kind: str) -> object:
        assert executor_registry.find(kind) is not None  # a kind the registry has

        def executor(opts: RunOptions, progress: object) -> None:
            seen.append((kind, opts))
            raise Taken

        return executor

    monkeypatch.setattr(stackmatrix.executor, "get_executor", get_executor)
    return seen


@pytest.mark.parametrize("given", [[], ["--executor", "local"]])
def test_calibrate_runs_through_the_spec_s_or_the_named_executor(
    tmp_path: Path, taken: list[tuple[str, RunOptions]], given: list[str]
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    with pytest.raises(Taken):
        main(["calibrate", str(spec), "--output", str(tmp_path / "out"), *given])
    ((kind, opts),) = taken
    assert kind == ("local" if given else "slurm")
    assert opts.cells == ("a",) and opts.spec.bench is not None


@pytest.mark.parametrize(("named", "expected"), [(None, "slurm"), ("local", "local")])
def test_an_explain_round_runs_through_the_spec_s_or_the_named_executor(
    tmp_path: Path, taken: list[tuple[str, RunOptions]], named: str | None, expected: str
) -> None:
    import tomllib

    spec = parse_spec(tomllib.loads(SPEC), path=str(tmp_path / "round-1.toml"))
    run_round = round_runner(tmp_path / "w", 1, lambda *a: None, named)
    with pytest.raises(Taken):
        run_round(spec, tmp_path / "round-1")
    ((kind, opts),) = taken
    assert kind == expected and opts.resume and opts.output == tmp_path / "round-1"
