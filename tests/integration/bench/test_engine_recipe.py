"""The recipe for a new engine, performed: in a copy of the package, its entry in
engine_registry.py and its adapter in bench/engines.py (2 files, as
docs/architecture.md says) make a spec naming it valid, `plan` list it, and the bench
launch its server, measure it and record it under its name. The server is the local
fake engine (fake_engine.py), started exactly as an engine is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.package_copy import perform_in_copy

pytestmark = pytest.mark.integration

FAKE = Path(__file__).with_name("fake_engine.py")

TRAITS = """    EngineTraits(
        name="tgi",
        distributions=("text-generation-server",),
        entry_modules=("text_generation_server",),
        extension_modules=("text_generation_server",),
        token_id_prompts=True,
    ),
"""
ADAPTER = '''

class TgiEngine(Engine):
    """A throwaway engine of the recipe's test."""

    name = "tgi"
    ready_paths = ("/health",)

    def module_argv(self, model: str, host: str, port: int) -> list[str]:
        return ["-m", "text_generation_server.cli", "serve", model, "--host", host,
                "--port", str(port)]
'''
SPEC = """
name = "recipe"
[[cell]]
id = "base"
[bench]
engine = "tgi"
model = "m"
launches = 1
rounds = 1
steady_warmup = false
[bench.workload]
input_len = 8
output_len = 4
num_prompts = 3
warmup = 1
"""
BENCH = """
import json, sys
from pathlib import Path
from stackmatrix.bench.phase import run_bench_phase
from stackmatrix.built_environment import Environment
from stackmatrix.results import RunDir
from stackmatrix.specfile import load_spec

spec = load_spec(Path(sys.argv[1]))
env = Environment(backend="venv", python=(sys.executable, sys.argv[2]), env={"FAKE_MODE": "ok"})
rd = RunDir(Path(sys.argv[3]))
res = run_bench_phase(spec, rd, ["base"], environments={"base": env}, order="interleaved")
print(json.dumps({"status": res["base"].status.value, "message": res["base"].message}))
"""


def _perform(copy: Path) -> None:
    reg = copy / "engine_registry.py"
    text = reg.read_text()
    anchor = "    # a server already running at `bench.url`"
    assert anchor in text
    reg.write_text(text.replace(anchor, TRAITS + anchor, 1))
    eng = copy / "bench/engines.py"
    text = eng.read_text()
    old = "(TransformersEngine, SglangEngine, VllmEngine, ExternalEngine)"
    assert old in text
    text = text.replace(
        old, "(TransformersEngine, SglangEngine, VllmEngine, ExternalEngine, TgiEngine)"
    )
    head, sep, rest = text.partition("\n\nENGINES: dict[str, type[Engine]]")
    eng.write_text(head + ADAPTER + sep + rest)


def test_a_new_engine_touches_two_files_and_is_benched(tmp_path: Path) -> None:
    site = tmp_path / "site"
    perform_in_copy(site, _perform, ["bench/engines.py", "engine_registry.py"])
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    env = {**os.environ, "PYTHONPATH": str(site)}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    # the installed package does not know it; the copy does
    assert (
        subprocess.run(
            [sys.executable, "-m", "stackmatrix", "validate", str(spec)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).returncode
        == 2
    )
    done = run("-m", "stackmatrix", "validate", str(spec))
    assert done.returncode == 0, done.stdout + done.stderr
    done = run("-c", BENCH, str(spec), str(FAKE), str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok", result
    bench = json.loads((tmp_path / "run/cells/base/bench.json").read_text())
    assert bench["data"]["engine"] == "tgi"
    rnd = bench["data"]["launches"][0]["rounds"][0]
    rows = (tmp_path / "run/cells/base" / rnd["requests_file"]).read_text().splitlines()
    assert len(rows) == 3 and all(json.loads(r)["ok"] for r in rows)
