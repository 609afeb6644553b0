from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stackmatrix.cli import main
from stackmatrix.errors import SpecError
from stackmatrix.specfile import BENCH_KEYS, CELL_KEYS, REPORT_KEYS, load_spec, parse_spec

MINIMAL: dict[str, Any] = {"name": "m", "cell": [{"id": "a", "pins": ["six==1.16.0"]}]}


def problems(raw: Mapping[str, object]) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(raw)
    assert info.value.exit_code == 2
    return info.value.problems


def test_minimal_spec_defaults() -> None:
    spec = parse_spec(MINIMAL)
    assert spec.baseline == "a"
    cell = spec.cell("a")
    assert cell.python == "3.11" and cell.backend == "venv" and cell.pins == ("six==1.16.0",)
    assert spec.bench is None


def test_unknown_keys_get_suggestions_at_every_level() -> None:
    raw = {
        "name": "m",
        "baselin": "a",
        "cell": [{"id": "a", "pin": ["six"]}],
        "bench": {"model": "x", "workload": {"input_length": 3}},
    }
    found = problems(raw)
    assert any(p.startswith("baselin:") and "'baseline'" in p for p in found)
    assert any(p.startswith("cell[0].pin:") and "did you mean 'pins'" in p for p in found)
    assert any(p.startswith("bench.workload.input_length:") and "'input_len'" in p for p in found)


def test_all_problems_reported_at_once() -> None:
    raw = {
        "name": 5,
        "cell": [
            {"id": "a", "python": 3.11, "pins": ["torch===", "six==1"], "gpus": "two"},
            {"id": "a"},
        ],
        "baseline": "nope",
        "targets": ["sm120"],
    }
    found = problems(raw)
    text = "\n".join(found)
    assert "name: expected a string, got an integer 5" in text
    assert "cell[0].python: expected a string, got a number 3.11" in text
    assert "cell[0].pins[0]: 'torch===' is not a PEP 508 requirement" in text
    assert "cell[0].gpus: expected an integer, got a string 'two'" in text
    assert "cell id 'a' is used by more than one cell" in text
    assert "baseline: 'nope' is not a cell" in text
    assert "targets[0]: 'sm120'" in text
    assert len(found) >= 7


def test_baseline_did_you_mean() -> None:
    raw = {"name": "m", "baseline": "cu12", "cell": [{"id": "cu128"}, {"id": "cu130"}]}
    assert any("did you mean 'cu128'" in p for p in problems(raw))


def test_explain_cells_name_cells_other_than_the_baseline() -> None:
    cells = [{"id": "cu128"}, {"id": "cu130"}, {"id": "eager"}]
    ok = parse_spec(
        {
            "name": "m",
            "baseline": "cu128",
            "cell": cells,
            "report": {"explain": True, "explain_cells": ["eager"]},
        }
    )
    assert ok.report.explain_cells == ("eager",)
    raw = {
        "name": "m",
        "baseline": "cu128",
        "cell": cells,
        "report": {"explain_cells": ["eagr", "cu128"]},
    }
    found = problems(raw)
    assert any("'eagr' is not a cell; did you mean 'eager'?" in p for p in found), found
    assert any("'cu128' is the baseline" in p for p in found), found


def test_baseline_required_with_several_cells() -> None:
    raw = {"name": "m", "cell": [{"id": "a"}, {"id": "b"}]}
    assert any(p.startswith("baseline: missing") for p in problems(raw))


@pytest.mark.parametrize(
    "pin",
    [
        "torch==2.9.1; rm -rf /",
        "torch==2.9.1 && curl evil",
        "torch==$(whoami)",
        "torch==2.9.1`id`",
        "torch==2.9.1\nsix",
        "pkg @ https://example.com/x.whl;$(id)",
    ],
)
def test_shell_syntax_in_pins_is_rejected(pin: str) -> None:
    found = problems({"name": "m", "cell": [{"id": "a", "pins": [pin]}]})
    assert any(p.startswith("cell[0].pins") for p in found), found


def test_shell_syntax_in_urls_and_env_names_is_rejected() -> None:
    raw = {
        "name": "m",
        "cell": [
            {
                "id": "a",
                "index_url": "https://x/simple; rm -rf /",
                "find_links": ["$(id)"],
                "env": {"A;B": "1", "OK": "x\ny"},
            }
        ],
    }
    text = "\n".join(problems(raw))
    assert "cell[0].index_url" in text
    assert "cell[0].find_links[0]" in text
    assert "cell[0].env.A;B" in text
    assert "cell[0].env.OK" in text and "control characters" in text


def test_server_args_with_shell_metacharacters_stay_inert() -> None:
    raw = {"name": "m", "cell": [{"id": "a", "server_args": ["--x", "; rm -rf / #"]}]}
    spec = parse_spec(raw)
    # kept verbatim as ONE argv element; nothing in stackmatrix builds shell text
    assert spec.cell("a").server_args == ("--x", "; rm -rf / #")


def test_duplicate_pins_and_bad_cell_id() -> None:
    raw = {"name": "m", "cell": [{"id": "a b", "pins": ["six==1", "Six>=1"]}]}
    text = "\n".join(problems(raw))
    assert "'a b' is not a cell id" in text
    assert "package 'six' is pinned more than once" in text


def test_axes_expand_as_product_with_include_and_exclude() -> None:
    raw = {
        "name": "m",
        "baseline": "3.11-t1",
        "defaults": {"pins": ["six==1.16.0"]},
        "axes": {
            "python": ["3.11", "3.12"],
            "stack": [
                {"label": "t1", "pins": ["packaging==24.1"]},
                {"label": "t2", "pins": ["packaging==24.2", "six==1.17.0"]},
            ],
        },
        "exclude": [{"python": "3.12", "stack": "t1"}],
        "include": [
            {"stack": "t2", "env": {"X": "1"}},
            {"id": "extra", "python": "3.13"},
        ],
    }
    spec = parse_spec(raw)
    ids = [c.id for c in spec.cells]
    assert ids == ["3.11-t1", "3.11-t2", "3.12-t2", "extra"]
    t2 = spec.cell("3.12-t2")
    assert t2.python == "3.12"
    # a later pin of the same package replaces the default's
    assert t2.pins == ("packaging==24.2", "six==1.17.0")
    assert dict(t2.env) == {"X": "1"}
    assert spec.cell("3.11-t1").pins == ("six==1.16.0", "packaging==24.1")
    assert dict(t2.axes) == {"python": "3.12", "stack": "t2"}


def test_duplicate_ids_through_include_are_all_reported_with_their_origins() -> None:
    raw = {
        "name": "m",
        "baseline": "a",
        "axes": {"python": ["3.11", "3.12"]},
        "include": [
            {"python": "3.11", "id": "a"},
            {"python": "3.12", "id": "b"},
            {"id": "a", "cuda": "12.8"},
            {"id": "solo"},
            {"id": "solo"},
        ],
    }
    found = [p for p in problems(raw) if "used by more than one cell" in p]
    assert len(found) == 2
    assert "cell id 'a'" in found[0] and "include[0].id" in found[0] and "include[2].id" in found[0]
    assert found[1] == (
        "cell: cell id 'solo' is used by more than one cell (include[3].id, include[4].id); "
        "ids must be unique"
    )


def test_duplicate_id_between_a_cell_table_and_the_axes_names_both() -> None:
    raw = {"name": "m", "baseline": "3.11", "cell": [{"id": "3.11"}], "axes": {"python": ["3.11"]}}
    assert (
        "cell: cell id '3.11' is used by more than one cell (cell[0].id, the axes "
        "(python=3.11)); ids must be unique" in problems(raw)
    )


def test_a_standalone_include_gets_the_defaults() -> None:
    raw = {
        "name": "m",
        "baseline": "12.8",
        "defaults": {"python": "3.12", "pins": ["six==1.16.0"]},
        "axes": {"cuda": ["12.8"]},
        "include": [{"id": "solo", "cuda": "13.0"}],
    }
    solo = parse_spec(raw).cell("solo")
    assert solo.python == "3.12" and solo.pins == ("six==1.16.0",)


class _CountedLabel(str):
    """A label that counts how often the expansion reads it."""

    reads = 0

    def __str__(self) -> str:
        _CountedLabel.reads += 1
        return str.__str__(self)


def test_forty_thousand_excludes_are_read_a_bounded_number_of_times() -> None:
    """Each exclude was compared with each combination: 40,000 took minutes. Counted,
    not timed: each exclude's labels are read a few times, not once per combination."""
    xs, ys = [f"x{i}" for i in range(40)], [f"y{i}" for i in range(25)]
    label = _CountedLabel
    removed = [{"x": label(x), "y": label(y)} for x in xs[:20] for y in ys]  # 500 combinations
    raw = {
        "name": "m",
        "baseline": "x39-y0",
        "axes": {"x": [{"label": x} for x in xs], "y": [{"label": y} for y in ys]},
        "exclude": removed * 80,
        "include": [{"x": "x39", "env": {"K": "1"}}] * 100,
    }
    _CountedLabel.reads = 0
    spec = parse_spec(raw)
    assert _CountedLabel.reads <= 4 * 2 * 40_000
    assert len(spec.cells) == 500 and spec.cells[0].id == "x20-y0"
    assert dict(spec.cell("x39-y0").env) == {"K": "1"}


def test_axes_that_expand_to_nothing() -> None:
    found = problems({"name": "m", "axes": {"python": []}})
    assert any("axes.python: this axis has no values" in p for p in found)
    found = problems({"name": "m", "axes": {"python": ["3.11"]}, "exclude": [{"python": "3.11"}]})
    assert any("expand to no cell at all" in p for p in found)


def test_exclude_naming_unknown_label() -> None:
    found = problems(
        {"name": "m", "axes": {"python": ["3.11", "3.12"]}, "exclude": [{"python": "3.9"}]}
    )
    assert any("'3.9' is not a label of axis 'python'" in p for p in found)


def test_bench_and_report_sections() -> None:
    raw = {
        **MINIMAL,
        "bench": {
            "engine": "sglang",
            "model": "/m",
            "launches": 3,
            "warmup_launches": 1,
            "workload": {"request_rate": "inf", "max_concurrency": 4},
        },
        "report": {"headline": "decode_tok_s", "fail_on": ["regression"], "min_effect": 0.0},
    }
    spec = parse_spec(raw)
    assert spec.bench is not None and spec.bench.launches == 3
    assert spec.bench.warmup_launches == 1
    assert math.isinf(spec.bench.workload.request_rate)
    assert spec.report.headline == "decode_tok_s" and spec.report.min_effect == 0.0


def test_bench_errors() -> None:
    raw = {
        **MINIMAL,
        "bench": {
            "engine": "tgi",
            "launches": 0,
            "warmup_launches": -1,
            "workload": {"kind": "file"},
        },
        "report": {"headline": "speed", "fail_on": ["slow"]},
    }
    text = "\n".join(problems(raw))
    assert "bench.engine: 'tgi' is not one of" in text
    assert "bench.launches: 0 is below the minimum 1" in text
    assert "bench.warmup_launches: -1 is below the minimum 0" in text
    assert "bench.workload.path" in text
    assert "report.headline: 'speed'" in text
    assert "report.fail_on[0]: 'slow'" in text


def test_external_engine_needs_url() -> None:
    text = "\n".join(problems({**MINIMAL, "bench": {"engine": "external"}}))
    assert "bench.url" in text


def test_load_spec_reports_toml_errors_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)
    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "none.toml")


def test_repository_specs_are_valid() -> None:
    root = Path(__file__).resolve().parents[2]
    specs = sorted((root / "matrix").glob("*.toml"))
    assert len(specs) >= 2
    for path in specs:
        spec = load_spec(path)
        assert spec.cells, path


@pytest.mark.parametrize("name", ["../../x", "/abs/x", "a/b", "..", "", ".hidden"])
def test_spec_name_is_one_plain_name(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # it names the results directory: "../../x" once put results outside --reports-dir
    assert any(p.startswith("name:") for p in problems({**MINIMAL, "name": name}))
    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "{name}"\n[[cell]]\nid = "a"\n')
    assert main(["validate", str(spec)]) == 2
    assert f"name: {name!r} is not a plain name" in capsys.readouterr().err


UNREADABLE = {
    "not-utf8": (b'name = "m"\n[[cell]]\nid = "a"\n# \xff\n', "not UTF-8 text"),
    "deep": (b'name = "m"\n[[cell]]\nid = "a"\npins = ' + b"[" * 1000 + b"]" * 1000, "nested"),
    "ipv6": (b'name = "m"\n[[cell]]\nid = "a"\nindex_url = "https://[::1"\n', "index_url"),
    "empty-baseline": (b'name = "m"\nbaseline = ""\n[[cell]]\nid = "a"\n', "baseline: ''"),
    "axis-name": (b'name = "m"\n[axes]\n__include__ = [{label = "a"}]\n', "axes.__include__"),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_hostile_specs_are_problems_not_tracebacks(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    content, expected = UNREADABLE[case]
    spec = tmp_path / "s.toml"
    spec.write_bytes(content)
    for command in ("validate", "plan"):
        assert main([command, str(spec)]) == 2
        assert expected in capsys.readouterr().err


def test_a_directory_is_not_a_spec(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read the spec"):
        load_spec(tmp_path)


# What TOML can hold (no null), with the words a spec uses, under the keys it knows.
SCALAR = (
    st.datetimes()
    | st.dates()
    | st.booleans()
    | st.integers(-5, 10**19)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["a", "b", "3.11", "12.8", "venv", "sm_90", "six==1", "https://x/s", ""])
)
NAMES = st.sampled_from([*CELL_KEYS, "label", "x"]) | st.text(max_size=5)
VALUE = st.recursive(
    SCALAR, lambda i: st.lists(i, max_size=3) | st.dictionaries(NAMES, i, max_size=4), max_leaves=10
)


def table(keys: Sequence[str]) -> st.SearchStrategy[dict[str, object]]:
    return st.dictionaries(st.sampled_from(list(keys)), VALUE, max_size=6)


SPECS = st.fixed_dictionaries(
    {"name": st.just("m") | VALUE},
    optional={
        "cell": st.lists(table(CELL_KEYS).map(lambda d: {"id": "a", **d}), max_size=3) | VALUE,
        "defaults": table(CELL_KEYS) | VALUE,
        "axes": st.dictionaries(NAMES, st.lists(VALUE, max_size=3) | VALUE, max_size=3),
        "include": st.lists(table([*CELL_KEYS, "x"]), max_size=2) | VALUE,
        "exclude": st.lists(table([*CELL_KEYS, "x"]), max_size=2) | VALUE,
        "bench": table(BENCH_KEYS) | VALUE,
        "report": table(REPORT_KEYS) | VALUE,
        **dict.fromkeys(("baseline", "targets", "driver", "order", "order_seed"), VALUE),
    },
)


@settings(max_examples=150, deadline=None)
@given(SPECS)
def test_any_spec_is_a_spec_or_its_problems(raw: dict[str, object]) -> None:
    """No value under any key makes the parser fail other than with SpecError (exit 2).
    3000 examples found nothing; 150 run here."""
    try:
        parse_spec(raw)
    except SpecError as exc:
        assert exc.exit_code == 2 and exc.problems


def test_layering_fields_for_an_air_gapped_host() -> None:
    cell = {
        "id": "a",
        "inherit": "current",
        "offline": True,
        "no_deps": True,
        "find_links": ["/opt/wheels"],
        "pins": ["sglang==0.5.14"],
    }
    spec = parse_spec({"name": "m", "cell": [cell]})
    got = spec.cell("a")
    assert (got.inherit, got.offline, got.no_deps) == ("current", True, True)
    found = problems(
        {
            "name": "m",
            "cell": [
                {"id": "a", "offline": "yes"},
                {"id": "b", "backend": "docker", "inherit": "current"},
                {"id": "c", "offline": True, "pins": ["six"]},
                {"id": "d", "inherit": "python3"},
            ],
            "baseline": "a",
        }
    )
    text = "\n".join(found)
    assert "expected true or false" in text
    assert "applies to the venv backend only, not 'docker'" in text
    assert "installs only from find_links" in text
    assert "inherit" in text and "python3" in text


def test_layering_fields_change_the_hash_only_when_set() -> None:
    from stackmatrix.plan import content_hash

    plain = parse_spec(MINIMAL).cell("a")
    layered = parse_spec({"name": "m", "cell": [{**MINIMAL["cell"][0], "no_deps": True}]})
    explicit_off = parse_spec({"name": "m", "cell": [{**MINIMAL["cell"][0], "no_deps": False}]})
    assert content_hash(plain) == content_hash(explicit_off.cell("a"))
    assert content_hash(plain) != content_hash(layered.cell("a"))


_BOUNDED = (
    "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
    "from stackmatrix.cli import main; sys.exit(main(['validate', sys.argv[1]]))"
)


def _validate_bounded(path: Path) -> tuple[int, str]:
    """`stackmatrix validate PATH` in a child with 20 s and 1 GiB: a regression hangs or
    grows without bound, and fails here instead of taking the test run with it."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _BOUNDED, str(path)],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    return proc.returncode, proc.stderr


def test_a_spec_that_is_no_regular_file_or_too_big_is_refused(tmp_path: Path) -> None:
    """/dev/zero was read without bound and a FIFO hung."""
    import os

    fifo = tmp_path / "spec.toml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        rc, err = _validate_bounded(path)
        assert rc == 2 and "not a regular file" in err, err
    big = tmp_path / "big.toml"
    big.write_text('name = "m"\n' + "# padding\n" * 200_000)
    rc, err = _validate_bounded(big)
    assert rc == 2 and "larger than 1048576 bytes" in err


def test_axes_and_cells_are_bounded(tmp_path: Path) -> None:
    """1000 x 1000 axes hung in the expansion; uniqueness checks were quadratic."""
    labels = ", ".join(f'{{label = "v{i}"}}' for i in range(1001))
    spec = tmp_path / "axes.toml"
    spec.write_text(f'name = "m"\n[axes]\na = [{labels}]\nb = [{labels}]\n')
    rc, err = _validate_bounded(spec)
    assert rc == 2 and "expand to 1002001 combinations (1001 x 1001); at most 1000" in err
    cells = [{"id": f"c{i}"} for i in range(1001)]
    found = problems({"name": "m", "baseline": "c0", "cell": cells})
    assert any("defines 1001 cells; at most 1000" in x for x in found)


def test_bench_sizes_have_sane_maxima() -> None:
    big = 10**18
    raw = {
        **MINIMAL,
        "bench": {
            "model": "m",
            "launches": big,
            "rounds": big,
            "workload": {"num_prompts": big, "input_len": big, "output_len": big},
        },
    }
    text = "\n".join(problems(raw))
    for key in (
        "launches",
        "rounds",
        "workload.num_prompts",
        "workload.input_len",
        "workload.output_len",
    ):
        assert f"bench.{key}: {big} is above the maximum" in text
    raw["bench"] = {"model": "m", "workload": {"num_prompts": 200_000, "input_len": 1000}}
    assert "num_prompts x input_len = 200000000 prompt tokens" in "\n".join(problems(raw))


def test_load_points_share_one_token_bound() -> None:
    """Every point is generated before the bench: 16 points each just under the bound
    were 16 times it."""
    work = {"num_prompts": 100_000, "input_len": 1000}  # 10^8, the bound itself
    points = [{"name": f"p{i}", "max_concurrency": 2**i} for i in range(16)]
    raw = {**MINIMAL, "bench": {"model": "m", "workload": work, "points": points}}
    assert problems(raw) == [
        "bench.points: the headline and its 16 load points generate 1700000000 prompt "
        "tokens in all (num_prompts x input_len, summed) before the bench; at most "
        "100000000: fewer points or smaller ones"
    ]
    small = {"num_prompts": 1000, "input_len": 1000}
    raw["bench"] = {"model": "m", "workload": small, "points": points}
    assert len(parse_spec(raw).bench.points) == 16  # type: ignore[union-attr]


def test_an_empty_or_unknown_generated_model_is_a_problem() -> None:
    """Both passed validation and failed only at the bench."""
    for model, expected in (
        ("", "bench.model: empty"),
        ("  ", "bench.model: empty"),
        ("stackmatrix:tiny-llama-70b", "is not a model stackmatrix generates"),
    ):
        assert any(expected in x for x in problems({**MINIMAL, "bench": {"model": model}}))
    for model in ("stackmatrix:tiny-llama", "stackmatrix:tiny-llama-1b", "org/model"):
        assert parse_spec({**MINIMAL, "bench": {"model": model}}).bench is not None


def _with_points(points: object) -> dict[str, object]:
    bench = {
        "model": "m",
        "workload": {"input_len": 100, "output_len": 20, "max_concurrency": 1},
        "points": points,
    }
    return {**MINIMAL, "bench": bench}


def test_load_points_take_the_headline_workload_with_overrides() -> None:
    points = [
        {"name": "c32", "max_concurrency": 32, "num_prompts": 64},
        {"name": "long", "input_len": 4000, "metric": "ttft_p99_ms"},
    ]
    spec = parse_spec(_with_points(points))
    assert spec.bench is not None
    c32, long = spec.bench.points
    assert (c32.name, c32.metric) == ("c32", "output_throughput")
    assert (c32.workload.max_concurrency, c32.workload.num_prompts) == (32, 64)
    assert (c32.workload.input_len, c32.workload.output_len) == (100, 20)  # inherited
    assert (long.workload.input_len, long.workload.max_concurrency) == (4000, 1)
    assert long.metric == "ttft_p99_ms"
    assert spec.bench.workload.max_concurrency == 1  # the headline is untouched


def test_bad_load_points_are_named() -> None:
    found = "\n".join(
        problems(
            _with_points(
                [
                    {"max_concurrency": 4},
                    {"name": "../x", "max_concurrency": 4},
                    {"name": "c8", "max_concurency": 8},
                    {"name": "c8", "max_concurrency": 0, "metric": "speed"},
                ]
            )
        )
    )
    assert "bench.points[0].name: missing" in found
    assert "bench.points[1].name: '../x'" in found
    assert "bench.points[2].max_concurency:" in found and "max_concurrency" in found
    assert "bench.points[3].name: 'c8' names two load points" in found
    assert "bench.points[3].max_concurrency:" in found
    assert "bench.points[3].metric:" in found
    assert "bench.points: expected an array of tables" in "\n".join(problems(_with_points(5)))


def test_a_file_load_point_without_a_path_is_a_problem_now_not_at_the_bench() -> None:
    found = problems(_with_points([{"name": "f", "kind": "file"}]))
    assert found == ['bench.points[0].path: kind = "file" needs path = "prompts.jsonl"']
    spec = parse_spec(_with_points([{"name": "f", "kind": "file", "path": "p.jsonl"}]))
    assert spec.bench is not None and spec.bench.points[0].workload.path == "p.jsonl"


def test_url_passwords_never_reach_a_validation_message() -> None:
    pw = "s3cr3t-pw"
    raw = {
        "name": "m",
        "cell": [
            {
                "id": "a",
                "index_url": f"https://user:{pw}@host/simple; rm -rf /",
                "extra_index_urls": [f"ftp://user:{pw}@host/simple"],
                "find_links": [f"https://user:{pw}@host/links|x"],
                "pins": [
                    f"torch @ https://user:{pw}@host/t.whl;$(id)",
                    f"bad pin https://u:{pw}@h/",
                ],
            }
        ],
    }
    found = problems(raw)
    assert len(found) == 5 and not [x for x in found if pw in x]
    assert "'https://user:***@host/simple; rm -rf /'" in "\n".join(found)


def test_a_bad_headline_key_is_said_once_not_again_per_point() -> None:
    raw = _with_points([{"name": "c8", "max_concurrency": 8}, {"name": "c16", "seed": -1}])
    raw["bench"]["workload"]["output_len"] = 0  # type: ignore[index]
    found = problems(raw)
    said = [x.split(":")[0] for x in found if "output_len" in x]
    assert said == ["bench.workload.output_len"]  # not again under bench.points[0], [1]
    assert any(x.startswith("bench.points[1].seed:") for x in found)  # the point's own key
    # a whole-workload limit the override causes is still the point's
    raw = _with_points([{"name": "big", "num_prompts": 200_000, "input_len": 1000}])
    assert [x.split(":")[0] for x in problems(raw)] == ["bench.points[0]"]


def test_client_workers_is_a_count_or_auto() -> None:
    def bench(value: object) -> dict[str, Any]:
        return {**MINIMAL, "bench": {"model": "/m", "client_workers": value}}

    def workers(raw: dict[str, Any]) -> object:
        spec = parse_spec(raw)
        assert spec.bench is not None
        return spec.bench.client_workers

    assert workers({**MINIMAL, "bench": {"model": "/m"}}) == 1  # in-process, as before
    assert workers(bench(8)) == 8 and workers(bench("auto")) == "auto"
    assert problems(bench(0)) == ["bench.client_workers: 0 is below the minimum 1"]
    assert problems(bench(257)) == ["bench.client_workers: 257 is above the maximum 256"]
    for bad in (2.5, True, [2]):
        (text,) = problems(bench(bad))
        assert text.startswith("bench.client_workers: expected an integer, got"), text
    (text,) = problems(bench("Auto"))
    assert text.startswith("bench.client_workers: 'Auto': expected a number") and '"auto"' in text


def test_a_warmup_smaller_than_the_measured_batch_is_warned_about() -> None:
    from stackmatrix.spec_model import warmup_advice

    raw = _with_points(
        [
            {"name": "c32", "max_concurrency": 32, "num_prompts": 64, "warmup": 32},
            {"name": "c8", "max_concurrency": 8, "num_prompts": 64, "warmup": 2},
        ]
    )
    headline = raw["bench"]["workload"]  # type: ignore[index]
    headline.update(max_concurrency=16, num_prompts=32, warmup=4)
    spec = parse_spec(raw)
    lines = warmup_advice(spec.bench)
    assert [x.split(":")[1].strip() for x in lines] == ["bench.workload", "bench.points 'c8'"]
    assert "use warmup >= 16" in lines[0] and "use warmup >= 8" in lines[1]
    headline["warmup"] = 0  # no warm-up asked for the headline: only c8 is said
    assert len(warmup_advice(parse_spec(raw).bench)) == 1


def test_steady_warmup_and_min_duration_keys() -> None:
    def bench(**keys: object) -> dict[str, object]:
        return {**MINIMAL, "bench": {"model": "/m", **keys}}

    spec = parse_spec(bench())
    assert spec.bench is not None and spec.bench.steady_warmup is True
    assert (spec.bench.warmup_max_batches, spec.bench.steady_tolerance) == (8, 0.05)
    assert spec.bench.min_duration_s == 0.0
    keys = {
        "steady_warmup": False,
        "warmup_max_batches": 3,
        "steady_tolerance": 0.1,
        "min_duration_s": 30,
    }
    spec = parse_spec(bench(**keys))
    assert spec.bench is not None and not spec.bench.steady_warmup
    assert (spec.bench.warmup_max_batches, spec.bench.steady_tolerance) == (3, 0.1)
    assert spec.bench.min_duration_s == 30.0


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("steady_warmup", "yes", "bench.steady_warmup: expected true or false, got"),
        ("warmup_max_batches", 0, "bench.warmup_max_batches: 0 is below the minimum 1"),
        ("warmup_max_batches", 1001, "bench.warmup_max_batches: 1001 is above the maximum 1000"),
        ("warmup_max_batches", 2.5, "bench.warmup_max_batches: expected an integer, got"),
        ("steady_tolerance", 0, "bench.steady_tolerance: 0: expected a relative change strictly"),
        ("steady_tolerance", 1.0, "bench.steady_tolerance: 1.0: expected a relative change"),
        ("steady_tolerance", 5, "bench.steady_tolerance: 5 is outside [0.0, 1.0]"),
        ("steady_tolerance", "5%", "bench.steady_tolerance: expected a number, got"),
        ("min_duration_s", -1, "bench.min_duration_s: -1 is outside [0.0, 86400.0]"),
        ("min_duration_s", 86401, "bench.min_duration_s: 86401 is outside [0.0, 86400.0]"),
    ],
)
def test_bad_steady_and_duration_keys_are_named(key: str, value: object, message: str) -> None:
    [text] = problems({**MINIMAL, "bench": {"model": "/m", key: value}})
    assert text.startswith(message), text


def test_prompt_form_token_ids_only_where_the_engine_takes_them() -> None:
    """transformers serve refuses a prompt that is not a string: the spec says so before
    anything runs; sglang, vLLM and an external server take token ids."""
    ids = {"input_len": 100, "prompt_form": "token_ids"}
    for engine in ("sglang", "vllm"):
        spec = parse_spec({**MINIMAL, "bench": {"engine": engine, "model": "m", "workload": ids}})
        assert spec.bench is not None and spec.bench.workload.prompt_form == "token_ids"
    external = {"engine": "external", "url": "http://127.0.0.1:1", "workload": ids}
    assert parse_spec({**MINIMAL, "bench": external}).bench is not None
    got = problems({**MINIMAL, "bench": {"engine": "transformers", "model": "m", "workload": ids}})
    assert got == [
        'bench.workload.prompt_form: "token_ids": engine "transformers" takes a prompt '
        'as a string only; use prompt_form = "text"'
    ]
    point = _with_points([{"name": "c2", "max_concurrency": 2, "prompt_form": "token_ids"}])
    assert problems(point) == [
        'bench.points[0].prompt_form: "token_ids": engine "transformers" takes a prompt '
        'as a string only; use prompt_form = "text"'
    ]
    bad = {**MINIMAL, "bench": {"model": "m", "workload": {"prompt_form": "ids"}}}
    assert any(x.startswith("bench.workload.prompt_form:") for x in problems(bad))
    default = parse_spec({**MINIMAL, "bench": {"model": "m"}}).bench
    assert default is not None and default.workload.prompt_form == "text"
