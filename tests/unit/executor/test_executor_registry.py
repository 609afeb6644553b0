"""The executor registry (executor_registry.py): the spec's and the CLI's names are its
names, every [executor] setting is read by some executor, a kind named in the spec
reads its own settings only, and get_executor finds each by its target."""

from __future__ import annotations

from dataclasses import fields

import pytest

from stackmatrix import executor_registry, spec_model, spec_names
from stackmatrix.errors import SpecError, UsageError
from stackmatrix.executor import get_executor
from stackmatrix.pipeline import run_pipeline
from stackmatrix.specfile import parse_spec

MINIMAL = {"name": "m", "cell": [{"id": "a", "pins": ["six==1.16.0"]}]}


def test_the_names_are_the_registrys() -> None:
    assert spec_names.EXECUTORS is executor_registry.NAMES
    assert executor_registry.NAMES == ("local", "slurm")


def test_every_setting_is_read_by_an_executor() -> None:
    settings = {f.name for f in fields(spec_model.Executor)} - {"kind"}
    read = {k for e in executor_registry.EXECUTORS for k in e.keys}
    assert read == settings


def test_get_executor_imports_the_target() -> None:
    from stackmatrix.executor.slurm import run_slurm

    assert get_executor("local") is run_pipeline
    assert get_executor("slurm") is run_slurm
    with pytest.raises(UsageError, match="choose one of local, slurm"):
        get_executor("k8s")


def test_a_named_kind_reads_its_own_settings_only() -> None:
    local = {**MINIMAL, "executor": {"kind": "local", "partition": "gpu", "poll_s": 2}}
    with pytest.raises(SpecError) as info:
        parse_spec(local)
    assert info.value.problems == [
        'executor.partition: read by kind = "slurm" only, and this spec\'s kind is "local"',
        'executor.poll_s: read by kind = "slurm" only, and this spec\'s kind is "local"',
    ]
    # without a kind, Slurm's settings wait for `run --executor slurm`
    spec = parse_spec({**MINIMAL, "executor": {"partition": "gpu"}})
    assert (spec.executor.kind, spec.executor.partition) == ("local", "gpu")
    slurm = parse_spec({**MINIMAL, "executor": {"kind": "slurm", "partition": "gpu"}})
    assert slurm.executor.kind == "slurm"
