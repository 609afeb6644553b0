"""Rendering build contexts and container argv (hermetic: no engine needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stackmatrix.builder import _docker_cli, _docker_context, docker
from stackmatrix.builder._docker_context import ContextError
from stackmatrix.built_environment import Environment
from stackmatrix.results import Status
from stackmatrix.spec_model import Cell
from stackmatrix.specfile import load_spec

REPO = Path(__file__).resolve().parents[3]
INSTRUCTIONS = {"ARG", "FROM", "RUN", "COPY", "ENV"}


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(instruction, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", dockerfile)
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word, rest))
    return out


@pytest.mark.parametrize("name", ["python", "cuda"])
@pytest.mark.parametrize("buildkit", [True, False])
def test_templates_are_exec_form_and_take_only_the_base_arg(name: str, buildkit: bool) -> None:
    path = _docker_context.template(name, buildkit=buildkit)  # type: ignore[arg-type]
    steps = _instructions(path.read_text())
    assert {w for w, _ in steps} <= INSTRUCTIONS
    assert steps[0] == ("ARG", steps[0][1]) and steps[0][1].startswith("BASE_IMAGE=")
    for word, rest in steps:
        if word == "RUN":
            flags, _, exec_form = rest.partition("[")
            argv = json.loads("[" + exec_form)  # exec form: no shell parses spec values
            assert all(isinstance(a, str) for a in argv)
            assert ("--mount" in flags) is buildkit
        assert set(re.findall(r"\$\{(\w+)\}", rest)) <= {"BASE_IMAGE", "PATH"}


def test_migration_spec_renders_both_cuda_stacks(tmp_path: Path) -> None:
    spec = load_spec(REPO / "matrix" / "kimi-k25-cuda13.toml")
    for cell in spec.cells:
        for buildkit in (True, False):
            ctx = _docker_context.render(
                cell, spec_dir=REPO / "matrix", dest=tmp_path / cell.id, buildkit=buildkit
            )
            assert ctx.family == "cuda" and ctx.base_image == cell.base_image
            assert (
                ctx.dockerfile.read_text()
                == _docker_context.template("cuda", buildkit=buildkit).read_text()
            )
            files = ctx.path / "stackmatrix"
            assert (files / "requirements.txt").read_text().splitlines() == list(cell.pins)
            plan = json.loads((files / "plan.json").read_text())
            assert plan["torch_backend"] == cell.torch_backend
            assert plan["find_links"] == list(cell.find_links)
            assert plan["python"] == "3.12" and plan["venv"] == docker.VENV_PATH
            assert plan["env"] == dict(cell.env)
            assert (files / "uv").read_bytes()[:4] == b"\x7fELF"
    bases = {c.id: c.base_image for c in spec.cells}
    assert bases == {
        "cu128": _docker_context.CUDA_BASES["12.8"],
        "cu130": _docker_context.CUDA_BASES["13.0"],
    }


def test_plan_keeps_secrets_out_and_concatenates_ca_certs(tmp_path: Path) -> None:
    (tmp_path / "a.pem").write_text("-----A-----\n")
    (tmp_path / "b.pem").write_text("-----B-----")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "x-1-py3-none-any.whl").write_bytes(b"zip")
    cell = Cell(
        id="c",
        base_image="debian:bookworm",
        pins=("six==1.16.0",),
        ca_certs=("a.pem", "b.pem"),
        find_links=("./wheels", "https://x.test/w/"),
        env=(("HF_TOKEN", "hf_x"), ("MY_API_KEY", "k"), ("NCCL_DEBUG", "WARN")),
    )
    ctx = _docker_context.render(cell, spec_dir=tmp_path, dest=tmp_path / "ctx", buildkit=True)
    files = ctx.path / "stackmatrix"
    plan = json.loads((files / "plan.json").read_text())
    assert plan["env"] == {"NCCL_DEBUG": "WARN"}
    assert plan["ca_bundle"] == "ca-bundle.crt"
    assert (files / "ca-bundle.crt").read_text() == "-----A-----\n-----B-----\n"
    assert plan["find_links"] == ["/opt/stackmatrix/build/find-links/0", "https://x.test/w/"]
    assert (files / "find-links/0/x-1-py3-none-any.whl").read_bytes() == b"zip"
    everything = "".join(
        p.read_text(errors="replace") for p in ctx.path.rglob("*") if p.is_file() and p.name != "uv"
    )
    assert "hf_x" not in everything


def test_no_ca_certs_means_an_empty_bundle_and_none_in_the_plan(tmp_path: Path) -> None:
    cell = Cell(id="c", base_image="debian:bookworm")
    ctx = _docker_context.render(cell, spec_dir=tmp_path, dest=tmp_path / "ctx", buildkit=False)
    assert (ctx.path / "stackmatrix/ca-bundle.crt").read_bytes() == b""
    assert json.loads((ctx.path / "stackmatrix/plan.json").read_text())["ca_bundle"] is None


@pytest.mark.parametrize(
    ("cell", "problem"),
    [
        (Cell(id="c", base_image="b", ca_certs=("missing.pem",)), "ca_certs entry 'missing.pem'"),
        (Cell(id="c", base_image="b", find_links=("./nowhere",)), "find_links entry './nowhere'"),
        (Cell(id="c", cuda="11.8"), "no default base image for cuda = '11.8'"),
    ],
)
def test_render_problems_are_actionable(cell: Cell, problem: str, tmp_path: Path) -> None:
    with pytest.raises(ContextError, match=re.escape(problem)):
        _docker_context.render(cell, spec_dir=tmp_path, dest=tmp_path / "ctx", buildkit=True)


def test_base_images_and_families() -> None:
    assert _docker_context.base_image(Cell(id="c", cuda="12.8")).startswith("nvidia/cuda:12.8.1-")
    assert _docker_context.base_image(Cell(id="c", cuda="13.0.1")).startswith("nvidia/cuda:13.0.1")
    assert _docker_context.base_image(Cell(id="c", python="3.12")) == "python:3.12-slim-bookworm"
    assert _docker_context.family("nvcr.io/nvidia/cuda:13.0.1-devel-ubuntu24.04") == "cuda"
    assert _docker_context.family("nvidia/cuda@sha256:abc") == "cuda"
    assert _docker_context.family("localhost:5000/python:3.12") == "python"


def test_image_tag_is_a_valid_reference() -> None:
    assert (
        docker.image_tag(Cell(id="CU130 / fast"), "ab" * 32)
        == "stackmatrix/cu130-fast:abababababab"
    )


def _env(**kw: str) -> Environment:
    return Environment(backend="docker", python=("docker",), image="stackmatrix/c:1", env=kw)


def test_container_command_host_network_gpus_mounts_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    argv = docker.container_command(
        _env(B="2", A="1"),
        ["python", "-m", "sglang.launch_server"],
        name="sm-c-1",
        port=30000,
        mounts=[("/models/a,b", "/models/m")],
        gpus=True,
        owner="stackmatrix-run1",
    )
    assert argv[1:7] == ["run", "--rm", "--init", "--name", "sm-c-1", "--label"]
    assert argv[7] == "stackmatrix.owner=stackmatrix-run1"
    assert "--network=host" in argv and "--publish" not in argv
    i = argv.index("--gpus")
    assert argv[i : i + 5] == ["--gpus", "all", "--ipc=host", "--shm-size", "16g"]
    assert (
        argv[argv.index("--mount") + 1]
        == 'type=bind,"source=/models/a,b",target=/models/m,readonly'
    )
    envs = [argv[j + 1] for j, a in enumerate(argv) if a == "--env"]
    assert envs == ["A=1", "B=2", "HF_TOKEN"]  # the secret by name only
    assert "hf_secret" not in " ".join(argv)
    assert argv[-4:] == ["stackmatrix/c:1", "python", "-m", "sglang.launch_server"]


def test_container_command_bridge_publishes_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    argv = docker.container_command(
        _env(), ["x"], name="n", port=8000, mounts=[], gpus=False, network="bridge"
    )
    i = argv.index("--network")
    assert argv[i : i + 4] == ["--network", "bridge", "--publish", "127.0.0.1:8000:8000"]
    assert "--gpus" not in argv and "--env" not in argv


def test_container_command_needs_an_image() -> None:
    with pytest.raises(ValueError, match="has no image"):
        docker.container_command(
            Environment(backend="venv", python=("p",)),
            ["x"],
            name="n",
            port=1,
            mounts=[],
            gpus=False,
        )


def test_missing_client_is_docker_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_docker_cli.DOCKER_ENV, str(tmp_path / "no-docker"))
    problem = _docker_cli.probe_engine()
    assert isinstance(problem, _docker_cli.EngineProblem)
    out = docker.build(
        Cell(id="c"),
        spec_dir=tmp_path,
        work_dir=tmp_path,
        content_hash="0" * 64,
        log_path=tmp_path / "build.log",
    )
    assert out.status is Status.FAILED and out.code == "docker_unavailable"
    assert "STACKMATRIX_DOCKER" in out.message
    docker.remove_container("anything")  # no client: nothing to do, no exception


def test_install_script_index_args() -> None:
    from stackmatrix.builder import _docker_install

    plan: _docker_install.Plan = {
        "index_url": "https://i/simple",
        "extra_index_urls": ["https://e/simple"],
        "find_links": ["/w"],
        "torch_backend": "cu130",
    }
    assert _docker_install._index_args(plan) == [
        "--index-url",
        "https://i/simple",
        "--extra-index-url",
        "https://e/simple",
        "--find-links",
        "/w",
        "--torch-backend",
        "cu130",
    ]


def test_container_command_keeps_jit_caches_in_a_volume_unless_the_cell_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    argv = docker.container_command(
        _env(TRITON_CACHE_DIR="/data/triton"),
        ["x"],
        name="n",
        port=8000,
        mounts=[],
        gpus=False,
        cache_volume="stackmatrix-jit-abc",
    )
    assert argv[argv.index("--mount") + 1] == (
        "type=volume,source=stackmatrix-jit-abc,target=/var/cache/stackmatrix-jit"
    )
    envs = [argv[j + 1] for j, a in enumerate(argv) if a == "--env"]
    # the cell's own choice stands; the other caches go to the volume
    assert envs == [
        "FLASHINFER_WORKSPACE_BASE=/var/cache/stackmatrix-jit",
        "TORCHINDUCTOR_CACHE_DIR=/var/cache/stackmatrix-jit/torchinductor",
        "TRITON_CACHE_DIR=/data/triton",
    ]
    plain = docker.container_command(_env(), ["x"], name="n", port=8000, mounts=[], gpus=False)
    assert "--mount" not in plain and "--env" not in plain
