from __future__ import annotations

from stackmatrix._secrets import REDACTED, redact, redact_argv


def test_redact_nested_mappings_by_key_name() -> None:
    data = {
        "api_key": "sk-123",
        "model": "m",
        "nested": [{"hf_token": "hf_x", "tp": 8}],
        "auth_token": None,
    }
    out = redact(data)
    assert out == {
        "api_key": REDACTED,
        "model": "m",
        "nested": [{"hf_token": REDACTED, "tp": 8}],
        "auth_token": None,
    }
    assert data["api_key"] == "sk-123"  # the input is not changed


def test_redact_argv_keeps_flags() -> None:
    argv = [
        "python",
        "-m",
        "sglang.launch_server",
        "--api-key",
        "sk-1",
        "--tp",
        "8",
        "--hf-token=hf_x",
    ]
    assert redact_argv(argv) == [
        "python",
        "-m",
        "sglang.launch_server",
        "--api-key",
        REDACTED,
        "--tp",
        "8",
        f"--hf-token={REDACTED}",
    ]
