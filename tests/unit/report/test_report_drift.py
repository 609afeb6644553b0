"""Configuration drift: facts, intended vs unintended, and the ranking kept as data."""

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stackmatrix.bench.engines import flatten
from stackmatrix.errors import Unreadable
from stackmatrix.report.config_drift import Ranking, diff, load_ranking
from stackmatrix.report.facts import collect
from stackmatrix.report.load import CellResults
from stackmatrix.report.logfacts import LogPattern, load_patterns, read_facts
from stackmatrix.results import PhaseResult, Status


def _cell(
    tmp_path: Path,
    cid: str,
    *,
    config: dict[str, Any] | None = None,
    launches: Sequence[dict[str, Any]] = (),
    lock: Sequence[tuple[str, str, str]] = (),
    probe: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    logs: Sequence[str] = (),
    definition: dict[str, Any] | None = None,
) -> CellResults:
    path = tmp_path / cid
    path.mkdir()
    for i, text in enumerate(logs):
        (path / f"server-L{i}.log").write_text(text)
    phases: dict[str, PhaseResult] = {}
    if lock or env:
        phases["build"] = PhaseResult(
            phase="build",
            cell=cid,
            status=Status.OK,
            inputs_hash="h",
            data={
                "lock": [dict(zip(("name", "version", "source"), p, strict=True)) for p in lock],
                "environment": {"env": env or {}},
            },
        )
    if probe is not None:
        phases["check"] = PhaseResult(
            phase="check",
            cell=cid,
            status=Status.OK,
            inputs_hash="h",
            data={"probe": probe, "driver": {"version": "580.1"}},
        )
    if config is not None:
        # bench.json keeps each launch's configuration and the last one for the cell
        records = [{"index": i, "effective_config": c} for i, c in enumerate(launches, 1)]
        phases["bench"] = PhaseResult(
            phase="bench",
            cell=cid,
            status=Status.OK,
            inputs_hash="h",
            data={"effective_config": config, "launches": records},
        )
    return CellResults(id=cid, path=path, phases=phases, definition=definition or {})


@pytest.fixture(scope="module")
def rules() -> tuple[tuple[LogPattern, ...], Ranking]:
    return load_patterns(), load_ranking()


def test_log_patterns_turn_lines_into_facts(tmp_path, rules):
    patterns, _ = rules
    (tmp_path / "a.log").write_text(
        "[t] WARNING model_config.py:856: DeepGemm is enabled but the scale_fmt of checkpoint\n"
        "[t] Capture cuda graph bs [1, 2, 4, 8]\n"
    )
    (tmp_path / "b.log").write_text(
        "DeepGemm is enabled but the scale_fmt\n[t] Capture cuda graph bs [1, 2]\n"
    )
    (tmp_path / "c.log").write_text("nothing here\n")
    facts = read_facts([tmp_path / "a.log", tmp_path / "b.log"], patterns)
    assert facts["deepgemm"].value == "on"
    evidence = facts["deepgemm"].evidence
    assert evidence is not None
    assert "model_config.py:856: DeepGemm is enabled" in evidence
    # Launches that disagree are shown as such.
    assert facts["cuda_graph_bs"].value == "[1, 2, 4, 8] | [1, 2]"
    quiet = read_facts([tmp_path / "c.log"], patterns)
    assert quiet["deepgemm"].value == "off" and quiet["deepgemm"].evidence is None
    assert "cuda_graph_bs" not in quiet
    assert read_facts([], patterns) == {}


def test_patterns_directory_is_configurable_and_checked(tmp_path):
    (tmp_path / "log_patterns.toml").write_text(
        '[[pattern]]\nfact = "x"\nregex = "MAGIC (?P<value>\\\\d+)"\n'
    )
    (patterns,) = load_patterns(tmp_path)
    match = patterns.regex.search("MAGIC 42")
    assert match is not None
    assert match.group("value") == "42"
    (tmp_path / "log_patterns.toml").write_text('[[pattern]]\nfact = "x"\nregex = "no group"\n')
    with pytest.raises(Unreadable, match="needs `value`"):
        load_patterns(tmp_path)
    with pytest.raises(Unreadable, match="is missing"):
        load_ranking(tmp_path)


def test_ranking_puts_kernels_before_nccl_before_noise(rules):
    _, ranking = rules
    order = [
        "server:attention_backend",
        "log:deepgemm",
        "server:moe_runner_backend",
        "server:cuda_graph_max_bs",
        "probe:nccl",
        "env:NCCL_ALGO",
        "package:torch",
        "server:log_level",
        "server:port",
    ]
    ranks = [ranking.of(k)[0] for k in order]
    assert ranks == sorted(ranks), list(zip(order, ranks, strict=True))
    assert ranking.of("server:something_new")[1] == "other"


def test_intended_vs_unintended(tmp_path, rules):
    patterns, ranking = rules
    base = _cell(
        tmp_path,
        "base",
        config={"attention_backend": "flashinfer", "port": 1, "tp_size": 8, "log_level": "info"},
        lock=[
            ("torch", "2.9.1+cu128", "idx"),
            ("nvidia-nccl-cu12", "2.27.5", "pypi"),
            ("flashinfer-python", "0.6.3", "pypi"),
            ("numpy", "2.1.0", "pypi"),
        ],
        probe={"cuda": "12.8", "nccl": "2.27.5", "env": {"HF_TOKEN": "abc"}},
        env={"OMP_NUM_THREADS": "4"},
        logs=["plain\n"],
    )
    cell = _cell(
        tmp_path,
        "cell",
        config={
            "attention_backend": "triton",
            "port": 2,
            "tp_size": 8,
            "log_level": "debug",
            "chunked_prefill_size": 4096,
        },
        lock=[
            ("torch", "2.9.1+cu130", "idx"),
            ("nvidia-nccl-cu13", "2.27.7", "pypi"),
            ("flashinfer-python", "0.6.4", "pypi"),
            ("numpy", "2.2.0", "pypi"),
        ],
        probe={"cuda": "13.0", "nccl": "2.27.7", "env": {"HF_TOKEN": "xyz"}},
        env={"OMP_NUM_THREADS": "8"},
        logs=["DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0\n"],
    )
    differs = {
        "cuda": ["12.8", "13.0"],
        "pins": [
            ["flashinfer-python==0.6.3", "torch==2.9.1"],
            ["flashinfer-python==0.6.4", "torch==2.9.1"],
        ],
        "env": [{"OMP_NUM_THREADS": "4"}, {"OMP_NUM_THREADS": "8"}],
        "server_args": [[], ["--chunked-prefill-size=4096"]],
    }
    drift = diff(collect(cell, patterns), collect(base, patterns), differs=differs, ranking=ranking)
    intended = {d.key: d.because for d in drift.intended}
    assert intended["cell:cuda"] == "cuda"
    assert intended["package:flashinfer-python"] == "pins"
    assert intended["package:torch"] == "cuda"  # same public version, new CUDA build
    assert intended["probe:cuda"] == "cuda"
    assert intended["env:OMP_NUM_THREADS"] == "env"
    assert intended["server:chunked_prefill_size"] == "server_args"
    unintended = [d.key for d in drift.unintended]
    assert unintended[:2] == ["server:attention_backend", "log:deepgemm"]
    assert {
        "package:nvidia-nccl",
        "probe:nccl",
        "package:numpy",
        "server:log_level",
        "env:HF_TOKEN",
    } <= set(unintended)
    assert unintended.index("package:numpy") < unintended.index("server:log_level")
    # a port is picked per launch: named as volatile, never a difference
    assert "server:port" not in unintended and drift.volatile == ("server:port",)
    secret = next(d for d in drift.unintended if d.key == "env:HF_TOKEN")
    assert "abc" not in str(secret.baseline)
    assert secret.baseline is not None and secret.baseline.startswith("<redacted")
    assert drift.not_compared == ()


def test_a_source_one_side_lacks_is_not_compared(tmp_path, rules):
    patterns, ranking = rules
    base = _cell(tmp_path, "base", config={"attention_backend": "flashinfer"})
    cell = _cell(tmp_path, "cell", lock=[("torch", "2.9.1", "pypi")])
    drift = diff(collect(cell, patterns), collect(base, patterns), differs={}, ranking=ranking)
    assert drift.unintended == ()
    assert any(
        "resolved server arguments: not recorded for this cell" in n for n in drift.not_compared
    )
    assert any("resolved lock: not recorded for the baseline" in n for n in drift.not_compared)


def test_same_version_from_another_index_is_a_difference(tmp_path, rules):
    patterns, ranking = rules
    base = _cell(tmp_path, "base", lock=[("sgl-kernel", "0.3.21", "pypi")])
    cell = _cell(tmp_path, "cell", lock=[("sgl-kernel", "0.3.21", "https://x.invalid/cu130")])
    (d,) = diff(
        collect(cell, patterns), collect(base, patterns), differs={}, ranking=ranking
    ).unintended
    assert d.value == "0.3.21 from https://x.invalid/cu130" and d.baseline == "0.3.21 from pypi"


def test_log_server_args_stand_in_for_missing_effective_config(tmp_path, rules):
    patterns, ranking = rules
    dump = "server_args=ServerArgs(model_path='m', attention_backend='{}', tp_size=1)\n"
    base = _cell(tmp_path, "base", logs=[dump.format("flashinfer")])
    cell = _cell(tmp_path, "cell", logs=[dump.format("triton")])
    drift = diff(collect(cell, patterns), collect(base, patterns), differs={}, ranking=ranking)
    assert drift.unintended[0].key == "server:attention_backend"
    assert drift.unintended[0].source == "server log"


def test_compat_files_live_at_the_repository_root():
    root = Path(__file__).resolve().parents[3] / "compat"
    assert (root / "log_patterns.toml").is_file() and (root / "drift_rank.toml").is_file()


def test_probe_versions_of_pinned_packages_are_intended(tmp_path, rules):
    patterns, ranking = rules
    base = _cell(
        tmp_path,
        "base",
        lock=[("flashinfer-python", "0.6.3", "pypi")],
        probe={"imports": {"flashinfer": {"version": "0.6.3", "seconds": 1.0}}},
    )
    cell = _cell(
        tmp_path,
        "cell",
        lock=[("flashinfer-python", "0.6.4", "pypi")],
        probe={"imports": {"flashinfer": {"version": "0.6.4", "seconds": 2.5}}},
    )
    differs = {"pins": [["flashinfer-python==0.6.3"], ["flashinfer-python==0.6.4"]]}
    drift = diff(collect(cell, patterns), collect(base, patterns), differs=differs, ranking=ranking)
    assert {d.key for d in drift.intended} == {
        "cell:pins",
        "package:flashinfer-python",
        "probe:imports.flashinfer.version",
    }
    assert drift.unintended == ()  # import timings are measurements, never compared


def test_sgl_kernel_is_the_import_of_sglang_kernel_too(tmp_path, rules):
    """The H200 upgrade run showed `probe imports.sgl_kernel.version` as unintended while
    its distribution, renamed sglang-kernel in 0.4, was a changed pin."""
    patterns, ranking = rules
    cells = [
        _cell(
            tmp_path,
            cid,
            lock=[("sglang-kernel", v, "pypi")],
            probe={"imports": {"sgl_kernel": {"version": v, "seconds": 1.0}}},
        )
        for cid, v in (("base", "0.4.2.post2"), ("cell", "0.4.4"))
    ]
    differs = {"pins": [["sglang-kernel==0.4.2.post2"], ["sglang-kernel==0.4.4"]]}
    drift = diff(
        collect(cells[1], patterns), collect(cells[0], patterns), differs=differs, ranking=ranking
    )
    assert "probe:imports.sgl_kernel.version" in {d.key for d in drift.intended}
    assert drift.unintended == ()


def test_the_driver_a_cuda_change_needs_is_intended(tmp_path, rules):
    """`cuda = "13.0"` made "driver cuda 12.8 -> 13.0" and "driver required_min"
    unintended differences; the driver found is still compared."""
    patterns, ranking = rules

    def cell(cid: str, cuda: str, required: str, found: str) -> CellResults:
        driver = {
            "cuda": cuda,
            "required_min": required,
            "family_min": required[:3],
            "found": found,
            "source": "host",
        }
        check = PhaseResult(
            phase="check",
            cell=cid,
            status=Status.OK,
            inputs_hash="h",
            data={"probe": {}, "driver": driver},
        )
        return CellResults(id=cid, path=tmp_path, phases={"check": check})

    base, mine = cell("a", "12.8", "570.26", "580.1"), cell("b", "13.0", "580.65", "590.2")
    differs = {"cuda": ["12.8", "13.0"]}
    drift = diff(collect(mine, patterns), collect(base, patterns), differs=differs, ranking=ranking)
    intended = {d.key: d.because for d in drift.intended}
    assert intended["driver:cuda"] == intended["driver:required_min"] == "cuda"
    assert intended["driver:family_min"] == "cuda"
    assert [d.key for d in drift.unintended] == ["driver:found"]


SGLANG_0_5_14 = Path(__file__).resolve().parents[2] / "fixtures" / "sglang-0.5.14"


def _sglang_launches(backend: str, seeds: Sequence[int]) -> list[dict[str, Any]]:
    """The flat /server_info of a real sglang 0.5.14 launch, once per seed: sglang draws
    `random_seed` anew at each launch when none is given."""
    info = json.loads((SGLANG_0_5_14 / f"server_info-{backend}.json").read_text())
    return [flatten(info) | {"random_seed": seed} for seed in seeds]


def test_a_seed_drawn_at_each_launch_is_volatile_not_a_difference(tmp_path, rules):
    patterns, ranking = rules
    cells = []
    for cid, backend, seeds in (
        ("base", "flashinfer", (11, 12, 13)),
        ("cell", "triton", (21, 22, 23)),
    ):
        launches = _sglang_launches(backend, seeds)
        cells.append(_cell(tmp_path, cid, config=launches[-1], launches=launches))
    base, cell = (collect(c, patterns) for c in cells)
    # the launches alone show it, without the known list
    for rank in (ranking, replace(ranking, volatile=())):
        drift = diff(cell, base, differs={}, ranking=rank)
        assert [d.key for d in drift.unintended] == ["server:attention_backend"]
        assert drift.volatile == ("server:random_seed",)


def test_seeds_that_differ_only_between_cells_are_volatile_by_the_known_list(tmp_path, rules):
    patterns, ranking = rules
    same = {"attention_backend": "flashinfer", "tp_size": 8}
    base = _cell(
        tmp_path,
        "base",
        config=same | {"random_seed": 1, "nccl_port": 5},
        launches=[same | {"random_seed": 1, "nccl_port": 5}],
    )
    cell = _cell(
        tmp_path,
        "cell",
        config=same | {"random_seed": 2, "nccl_port": 6},
        launches=[same | {"random_seed": 2, "nccl_port": 6}],
    )
    mine, theirs = collect(cell, patterns), collect(base, patterns)
    drift = diff(mine, theirs, differs={}, ranking=ranking)
    assert drift.unintended == ()
    assert drift.volatile == ("server:nccl_port", "server:random_seed")
    # one launch each is no evidence: without the list they would be differences
    unlisted = diff(mine, theirs, differs={}, ranking=replace(ranking, volatile=()))
    assert [d.key for d in unlisted.unintended] == ["server:nccl_port", "server:random_seed"]


def test_a_seed_the_cell_asks_for_stays_an_intended_difference(tmp_path, rules):
    patterns, ranking = rules
    launches = [{"random_seed": s, "attention_backend": "flashinfer"} for s in (1, 2)]
    base = _cell(tmp_path, "base", config=launches[-1], launches=launches)
    fixed = [{"random_seed": 7, "attention_backend": "flashinfer"}] * 2
    cell = _cell(tmp_path, "cell", config=fixed[-1], launches=fixed)
    drift = diff(
        collect(cell, patterns),
        collect(base, patterns),
        differs={},
        ranking=ranking,
        cell_server_args=("--random-seed", "7"),
    )
    assert [d.key for d in drift.intended] == ["server:random_seed"]
    assert drift.unintended == () and drift.volatile == ()


def test_what_the_probes_imports_mapped_is_no_difference(tmp_path, rules):
    """loaded_libraries and the serving import's record differ by construction between
    cells of other stacks; an import's ok and version stay compared."""
    patterns, ranking = rules

    def probe(lib: str, imported: str, ok: bool) -> dict[str, Any]:
        return {
            # which libcuda.so.1 the probe ran with: a toolkit stub at each image's path
            "libcuda": {"source": "stub", "stub": f"/usr/local/{lib}/lib64/stubs/libcuda.so"},
            "loaded_libraries": [f"/opt/venv/site-packages/{lib}"],
            "serving": {"imported": imported, "modules": [{"module": imported, "ok": True}]},
            "imports": {"deep_gemm": {"ok": ok, "traceback_tail": [f"File {lib}"]}},
        }

    base = _cell(tmp_path, "base", probe=probe("a/_C.so", "sglang.srt.server_args", False))
    cell = _cell(tmp_path, "cell", probe=probe("b/_C.so", "sglang", True))
    drift = diff(collect(cell, patterns), collect(base, patterns), differs={}, ranking=ranking)
    assert [d.key for d in drift.unintended] == ["probe:imports.deep_gemm.ok"]
