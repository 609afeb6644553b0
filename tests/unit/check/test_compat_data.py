from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from stackmatrix.check import driver, inventory, probe
from stackmatrix.check.phase import verdict_of
from stackmatrix.findings import Finding, Severity


def test_driver_table() -> None:
    r128 = driver.requirement("12.8")
    assert (r128.toolkit_min, r128.family_min) == ("570.26", "525.60.13")
    assert driver.requirement("13.0").toolkit_min.startswith("580")  # type: ignore[union-attr]
    assert driver.requirement("12.7").toolkit_min == driver.requirement("12.6").toolkit_min


@pytest.mark.parametrize(
    ("cuda", "found", "verdict"),
    [
        ("12.8", "570.26", "ok"),
        ("12.8", "550.54.14", "minor-compat"),
        ("12.8", "520.1", "too-old"),
        ("13.0", "575.51.03", "too-old"),
        ("13.0", "580.159", "ok"),
    ],
)
def test_judge_driver(cuda: str, found: str, verdict: str) -> None:
    req = driver.requirement(cuda)
    assert driver.judge_driver(req, driver.DriverFound(version=found, source="declared")) == verdict


def test_declared_driver_wins() -> None:
    assert driver.find_driver("580.1") == driver.DriverFound(version="580.1", source="declared")


def test_cuda_major_evidence() -> None:
    major, ev = inventory.cuda_major(
        "torch",
        "2.9.1+cu128",
        "cu128",
        ["nvidia-cuda-runtime-cu12==12.8.90; platform_system == 'Linux'"],
        [],
    )
    assert major == 12 and any("+cu128" in e for e in ev)
    major, _ = inventory.cuda_major("torch", "2.11.0", None, ["nvidia-cuda-runtime==13.0.96"], [])
    assert major == 13
    major, _ = inventory.cuda_major(
        "sgl-kernel", "0.3.21", None, [], ["libcudart.so.12", "libc.so.6"]
    )
    assert major == 12
    assert inventory.cuda_major("numpy", "2.0", None, ["packaging"], ["libc.so.6"]) == (None, ())


def test_read_inventory(tmp_path: Path) -> None:
    info = tmp_path / "torch-2.9.1+cu128.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.9.1+cu128\n"
        "Requires-Dist: nvidia-cublas-cu12==12.8.4.1\n\nbody\n"
    )
    (info / "RECORD").write_text("torch/__init__.py,,\n")
    inv = inventory.read_inventory([tmp_path])
    dist = inv.get("Torch")
    assert dist is not None and dist.local == "cu128" and dist.cuda_major == 12
    assert inv.owner_of("torch/__init__.py") == "torch"


def test_verdict_of() -> None:
    def f(sev: Severity) -> Finding:
        return Finding(code="X", severity=sev, message="m")

    assert verdict_of([]) == "compatible"
    assert verdict_of([f(Severity.INFO)]) == "compatible"
    assert verdict_of([f(Severity.INFO), f(Severity.WARN)]) == "warnings"
    assert verdict_of([f(Severity.WARN), f(Severity.FAIL)]) == "incompatible"


def _without_behaviour_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe reports the behaviour variables it sees, ours included: none of ours."""
    from stackmatrix.check import _probe_script

    for name in list(os.environ):
        if name.startswith(_probe_script.ENV_PREFIXES) or name in _probe_script.ENV_NAMES:
            monkeypatch.delenv(name)


def test_probe_runs_without_stackmatrix_and_redacts(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_behaviour_env(monkeypatch)
    env = {
        "PATH": "/usr/bin:/bin",
        "NCCL_DEBUG": "INFO",
        "SGLANG_API_TOKEN": "s3cret",
        "CUDA_VISIBLE_DEVICES": "0",
    }
    data = probe.run_probe([sys.executable, "-I"], modules=["json", "no_such_module_x"], env=env)
    assert data["schema_version"] == 1
    assert data["env"] == {
        "CUDA_VISIBLE_DEVICES": "0",
        "NCCL_DEBUG": "INFO",
        "SGLANG_API_TOKEN": "<redacted>",
    }
    assert data["imports"]["json"]["ok"] is True
    assert data["imports"]["no_such_module_x"] == {"installed": False}
    if not data["gpu"]["cuda_available"]:
        assert data["smoke"]["ok"] is None and data["gpu"]["devices"] == []
    assert "s3cret" not in json.dumps(data)


def test_probe_env_hides_secret_values_under_innocent_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A URL password or a token's shape is a secret whatever the variable is called."""
    _without_behaviour_env(monkeypatch)
    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmN"
    env = {
        "SGLANG_OTLP_ENDPOINT": "https://otel:hunter2pass@collector.example:4317",
        "PYTORCH_HUB_CONFIG": f"x {token} y",
        "NCCL_DEBUG": "INFO",
    }
    data = probe.run_probe([sys.executable, "-I"], modules=["json"], env=env)
    assert data["env"] == {
        "NCCL_DEBUG": "INFO",
        "PYTORCH_HUB_CONFIG": "x <redacted> y",
        "SGLANG_OTLP_ENDPOINT": "https://otel:<redacted>@collector.example:4317",
    }
    assert "hunter2pass" not in json.dumps(data) and token not in json.dumps(data)


def test_probe_env_adds_to_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cell's env is laid over the environment that runs stackmatrix, never put in
    its place: the docker backend's probe is the docker CLI, which finds its engine
    through DOCKER_HOST (a rootless or second engine) and its config through HOME."""
    _without_behaviour_env(monkeypatch)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "from-the-host")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    data = probe.run_probe([sys.executable, "-I"], modules=["json"], env={"NCCL_DEBUG": "INFO"})
    assert data["env"] == {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "from-the-host"}


def test_probe_parse_output_needs_marker() -> None:
    with pytest.raises(probe.ProbeFailed, match="printed no result"):
        probe.parse_output("hello\nworld\n")
