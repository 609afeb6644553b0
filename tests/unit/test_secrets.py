from __future__ import annotations

from stackmatrix._secrets import (
    CREDENTIAL_NAME_PATTERN,
    REDACTED,
    is_secret_name,
    redact,
    redact_argv,
    redact_text,
)


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


def test_tokenizer_settings_are_configuration_not_secrets() -> None:
    # Real resolved server args of sglang 0.5.14 (issue 13): a tokenizer change between
    # cells must stay visible, while credentials stay hidden.
    kept = [
        "tokenizer_path", "tokenizer_mode", "tokenizer_worker_num", "skip_tokenizer_init",
        "max_total_tokens", "max_prefill_tokens", "chunked_prefill_size", "keyfile",
    ]  # fmt: skip
    hidden = [
        "hf_token", "api_key", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "admin-api-key",
        "ssl_keyfile_password", "authorization", "hfToken", "GITHUB_TOKEN", "OPENAI_KEY",
    ]  # fmt: skip
    assert [k for k in kept if is_secret_name(k)] == []
    assert [k for k in hidden if not is_secret_name(k)] == []


def test_credential_shaped_values_are_hidden_under_any_name() -> None:
    data = {"note": "uses hf_abcdefghijklmnopqrstuvwxyz012345 here", "tp": "8"}
    assert redact(data) == {"note": f"uses {REDACTED} here", "tp": "8"}
    assert redact_argv(["--model", "sk-abcdefghijklmnopqrstuvwx"]) == ["--model", REDACTED]


def test_probe_script_uses_the_same_secret_words() -> None:
    from stackmatrix.compat import _probe_script

    assert _probe_script.CREDENTIAL_NAME_PATTERN == CREDENTIAL_NAME_PATTERN


def test_credentials_in_urls_keep_the_user_and_host() -> None:
    url = "https://__token__:pypi-AgEIcHlwaS5vcmc@index.example/simple"
    assert redact_text(url) == f"https://__token__:{REDACTED}@index.example/simple"
    assert redact_text("git+https://ghtoken123@github.com/o/r") == (
        f"git+https://{REDACTED}@github.com/o/r"
    )
    argv = ["uv", "pip", "compile", "--extra-index-url", url, "--find-links", "/opt/wheels"]
    assert url not in " ".join(redact_argv(argv))
    assert redact_text("https://index.example/simple") == "https://index.example/simple"
    pins = {"pins": ["pkg @ https://u:p4ss@host.example/pkg-1.0-py3-none-any.whl"]}
    assert "p4ss" not in str(redact(pins))
