"""Standalone script run inside a docker build: creates the cell's venv and installs its pins.

It reads every value from plan.json next to it (written by the docker backend), so no
spec value is ever spliced into shell text in the Dockerfile. It must not import
stackmatrix and must run on whatever python3 the base image has, so it sticks to the
standard library and Python 3.8 syntax.

usage: python3 install.py PLAN.json
"""

import json
import os
import subprocess
import sys


def _index_args(plan):  # type: ignore[no-untyped-def]
    args = []
    if plan.get("index_url"):
        args += ["--index-url", plan["index_url"]]
    for url in plan.get("extra_index_urls", []):
        args += ["--extra-index-url", url]
    for link in plan.get("find_links", []):
        args += ["--find-links", link]
    if plan.get("torch_backend"):
        args += ["--torch-backend", plan["torch_backend"]]
    return args


def _env(plan, here):  # type: ignore[no-untyped-def]
    env = dict(os.environ)
    # the cache lives on a BuildKit cache mount (or nowhere): copy, don't hardlink
    env["UV_LINK_MODE"] = "copy"
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    env.update(plan.get("env", {}))
    if plan.get("ca_bundle"):
        env["SSL_CERT_FILE"] = os.path.join(here, plan["ca_bundle"])
    if plan.get("no_cache"):
        env["UV_NO_CACHE"] = "1"
    return env


def _run(argv, env):  # type: ignore[no-untyped-def]
    print("stackmatrix-install: $ " + " ".join(argv), flush=True)
    rc = subprocess.call(argv, env=env)
    if rc != 0:
        print("stackmatrix-install: command failed with exit code %d" % rc, flush=True)
        sys.exit(rc)


def main():  # type: ignore[no-untyped-def]
    plan_path = os.path.abspath(sys.argv[1])
    here = os.path.dirname(plan_path)
    with open(plan_path, encoding="utf-8") as fh:
        plan = json.load(fh)
    uv = os.path.join(here, "uv")
    venv = plan["venv"]
    env = _env(plan, here)
    _run([uv, "venv", "--python", plan["python"], venv], env)
    requirements = os.path.join(here, plan["requirements"])
    python = os.path.join(venv, "bin", "python")
    # resolve once, with index annotations (the lock records where each package came
    # from), then install exactly that: one resolution for all pins, as the venv backend
    compiled = os.path.join(venv, plan["compiled"])
    with open(requirements, encoding="utf-8") as fh:
        if not fh.read().strip():
            open(compiled, "w").close()
            print("stackmatrix-install: no pins; the venv stays empty", flush=True)
            return
    py = ["--python", python]
    idx = _index_args(plan)
    _run([uv, "pip", "compile", requirements, "-o", compiled, "--emit-index-annotation",
          *py, *idx], env)  # fmt: skip
    _run([uv, "pip", "sync", compiled, *py, *idx], env)
    print("stackmatrix-install: done", flush=True)


if __name__ == "__main__":
    main()
