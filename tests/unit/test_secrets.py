from __future__ import annotations

import time
from pathlib import Path

import pytest

from stackmatrix._secrets import (
    CREDENTIAL_NAME_PATTERN,
    MORE_CREDENTIAL_NAME_PATTERN,
    REDACTED,
    is_secret_name,
    is_secret_value,
    redact,
    redact_argv,
    redact_files,
    redact_spec_text,
    redact_text,
    secret_values,
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
    # Real resolved server args of sglang 0.5.14: a tokenizer change between
    # cells must stay visible, while credentials stay hidden.
    kept = [
        "tokenizer_path",
        "tokenizer_mode",
        "tokenizer_worker_num",
        "skip_tokenizer_init",
        "max_total_tokens",
        "max_prefill_tokens",
        "chunked_prefill_size",
        "keyfile",
    ]
    hidden = [
        "hf_token",
        "api_key",
        "AWS_SECRET_ACCESS_KEY",
        "HF_TOKEN",
        "admin-api-key",
        "ssl_keyfile_password",
        "authorization",
        "hfToken",
        "GITHUB_TOKEN",
        "OPENAI_KEY",
    ]
    assert [k for k in kept if is_secret_name(k)] == []
    assert [k for k in hidden if not is_secret_name(k)] == []


def test_credential_shaped_values_are_hidden_under_any_name() -> None:
    data = {"note": "uses hf_abcdefghijklmnopqrstuvwxyz012345 here", "tp": "8"}
    assert redact(data) == {"note": f"uses {REDACTED} here", "tp": "8"}
    assert redact_argv(["--model", "sk-abcdefghijklmnopqrstuvwx"]) == ["--model", REDACTED]


def test_probe_script_uses_the_same_secret_words() -> None:
    from stackmatrix.check import _probe_script

    assert _probe_script.CREDENTIAL_NAME_PATTERN == CREDENTIAL_NAME_PATTERN
    assert _probe_script.MORE_CREDENTIAL_NAME_PATTERN == MORE_CREDENTIAL_NAME_PATTERN
    assert _probe_script._SECRET.search("VLLM_DB_PASS") and _probe_script._SECRET.search("PGPASS")


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


def test_secret_values_from_flags_and_environment() -> None:
    argv = [
        "serve",
        "--api-key",
        "k-12345",
        "--hf-token=hf-abcdef",
        "--port",
        "30000",
        "--tokenizer-path",
        "/models/tok",
    ]
    env = {"HF_TOKEN": "tok-999", "MAX_TOTAL_TOKENS": "4096", "AUTH": ""}
    assert secret_values(argv, env) == {"k-12345", "hf-abcdef", "tok-999"}
    assert secret_values(["--api-key", "x"]) == set()  # too short to hide safely


def test_redact_files_rewrites_only_what_holds_a_secret(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"ServerArgs(api_key='k-12345', port=1)\nfrom https://u:pw@h/simple\n\xff\n")
    clean = tmp_path / "clean.log"
    clean.write_text("nothing here\n")
    before = clean.stat().st_mtime_ns
    link = tmp_path / "link.log"
    link.symlink_to(log)
    redact_files(log, clean, link, tmp_path / "missing.log", known=["k-12345"])
    assert log.read_bytes() == (
        f"ServerArgs(api_key='{REDACTED}', port=1)\nfrom https://u:{REDACTED}@h/simple\n".encode()
        + b"\xff\n"
    )
    assert clean.stat().st_mtime_ns == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clean.log", "link.log", "server.log"]


def test_spec_text_hides_every_value_of_a_secret_flag() -> None:
    text = (
        'server_args = ["--hf-token=hf-planted-1", "--api-key", "planted-2", "--tp", "8"]\n'
        'server_args = [\n  "--db-pass",  # the database\n  "planted-3",\n  "--creds",\n'
        '  \'planted-4\',\n  "--authkey=planted-5",\n  "--tokenizer-path", "/models/tok",\n]\n'
    )
    hidden = redact_spec_text(text)
    assert "planted" not in hidden
    assert f'"--hf-token={REDACTED}", "--api-key", "{REDACTED}", "--tp", "8"' in hidden
    assert '"--tokenizer-path", "/models/tok"' in hidden
    argv = ["--hf-token=hf-planted-1", "--api-key", "planted-2", "--db-pass", "planted-3"]
    assert redact_argv(argv) == [
        f"--hf-token={REDACTED}",
        "--api-key",
        REDACTED,
        "--db-pass",
        REDACTED,
    ]


def test_more_credential_names_and_words_that_only_look_like_one() -> None:
    hidden = [
        "MY_CREDS",
        "DB_PASS",
        "PGPASS",
        "PASSPHRASE",
        "PGPASSWORD",
        "GPG_PASSPHRASE",
        "db-pass",
        "dbPass",
        "authkey",
        "auth_token",
    ]
    kept = [
        "PASSTHROUGH_MODE",
        "COMPASS",
        "BYPASS",
        "enable_forward_pass_metrics",
        "pass_rate",
        "credit",
        "keyfile",
        "tokenizer_path",
    ]
    assert [k for k in hidden if not is_secret_name(k)] == []
    assert [k for k in kept if is_secret_name(k)] == []


def test_a_value_assigned_to_a_secret_name_in_text_is_hidden() -> None:
    line = (
        "ServerArgs(model_path='m', api_key='plain-key', tp_size=8, hf_token=None, "
        'admin_api_key="zz-top") {"auth_token": "abc"} GET /x?access_token=q1&y=2 '
        "tokenizer_path=/tok max_total_tokens=5"
    )
    assert redact_text(line) == (
        f"ServerArgs(model_path='m', api_key='{REDACTED}', tp_size=8, hf_token=None, "
        f'admin_api_key="{REDACTED}") {{"auth_token": "{REDACTED}"}} '
        f"GET /x?access_token={REDACTED}&y=2 tokenizer_path=/tok max_total_tokens=5"
    )


def test_a_url_password_is_a_secret_value() -> None:
    assert is_secret_value("https://otel:pw1234@collector:4317")
    assert not is_secret_value("https://collector:4317/v1")


@pytest.mark.parametrize("text", ["a" * 200_000 + "=", "a" * 200_000 + "://", "x:" * 100_000])
def test_a_long_word_is_redacted_in_linear_time(text: str) -> None:
    started = time.monotonic()
    assert redact_text(text) == text
    assert time.monotonic() - started < 2.0  # 200 kB of letters took over a minute
