"""Standalone script run inside a docker build: creates the cell's venv and installs its pins.

It reads every value from plan.json next to it (written by the docker backend), so no
spec value is ever spliced into shell text in the Dockerfile. It must not import
stackmatrix and must run on whatever python3 the base image has, so it sticks to the
standard library and Python 3.8.

usage: python3 install.py PLAN.json
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TypedDict


class Plan(TypedDict, total=False):
    """plan.json, as the docker backend writes it (_docker_context.py writes every key;
    the optional ones are null when the cell leaves them out)."""

    schema_version: int
    cell: str
    python: str
    venv: str
    requirements: str
    compiled: str
    index_url: str | None
    extra_index_urls: list[str]
    find_links: list[str]
    torch_backend: str | None
    ca_bundle: str | None
    env: dict[str, str]


def _index_args(plan: Plan) -> list[str]:
    args: list[str] = []
    index_url, torch_backend = plan.get("index_url"), plan.get("torch_backend")
    if index_url:
        args += ["--index-url", index_url]
    for url in plan.get("extra_index_urls", []):
        args += ["--extra-index-url", url]
    for link in plan.get("find_links", []):
        args += ["--find-links", link]
    if torch_backend:
        args += ["--torch-backend", torch_backend]
    return args


def _env(plan: Plan, here: Path) -> dict[str, str]:
    env = dict(os.environ)
    # the cache lives on a BuildKit cache mount (or nowhere): copy, don't hardlink
    env["UV_LINK_MODE"] = "copy"
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    env.update(plan.get("env", {}))
    ca_bundle = plan.get("ca_bundle")
    if ca_bundle:
        env["SSL_CERT_FILE"] = str(here / ca_bundle)
    return env


# A URL's user info (`https://user:TOKEN@host`, `https://TOKEN@host`): uv needs it, the
# image and the build output must not keep it (stackmatrix._secrets hides the same).
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@]+@")


def _hidden(text: str) -> str:
    return _USERINFO.sub(r"\1<redacted>@", text)


def _run(argv: list[str], env: dict[str, str]) -> None:
    print("stackmatrix-install: $ " + _hidden(" ".join(argv)), flush=True)
    rc = subprocess.call(argv, env=env)
    if rc != 0:
        print(f"stackmatrix-install: command failed with exit code {rc}", flush=True)
        sys.exit(rc)


def main() -> None:
    plan_path = Path(sys.argv[1]).resolve()
    here = plan_path.parent
    plan: Plan = json.loads(plan_path.read_text(encoding="utf-8"))
    uv = str(here / "uv")
    venv = Path(plan["venv"])
    env = _env(plan, here)
    _run([uv, "venv", "--python", plan["python"], str(venv)], env)
    requirements = here / plan["requirements"]
    compiled = venv / plan["compiled"]
    if not requirements.read_text(encoding="utf-8").strip():
        compiled.write_text("")
        print("stackmatrix-install: no pins; the venv stays empty", flush=True)
        return
    # resolve once, with index annotations (the lock records where each package came
    # from), then install exactly that: one resolution for all pins, as the venv backend
    py = ["--python", str(venv / "bin" / "python")]
    idx = _index_args(plan)
    _run(
        [
            uv,
            "pip",
            "compile",
            str(requirements),
            "-o",
            str(compiled),
            "--emit-index-annotation",
            *py,
            *idx,
        ],
        env,
    )
    _run([uv, "pip", "sync", str(compiled), *py, *idx], env)
    # the lock stays in the image (it says what was installed from where), its
    # credentials do not
    compiled.write_text(_hidden(compiled.read_text(encoding="utf-8")), encoding="utf-8")
    print("stackmatrix-install: done", flush=True)


if __name__ == "__main__":
    main()
